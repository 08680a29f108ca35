// Building a broadcast request (one Live Activity update for every device subscribed to a channel)
// from unchecked text, reporting every problem at once as `APNsRequest.parse` does for devices.

import JSON

extension APNsRequest {
    /// Builds a broadcast on `channelID` from text fields, or throws every problem found.
    ///
    /// The fields mean what they mean in `parse(deviceToken:...)`; the push type defaults to (and must
    /// be) liveactivity: Apple, "Sending broadcast push notification requests to APNs".
    public static func parse(
        channelID: String, environment: String? = nil, bundleOrTopic: String, pushType: String? = nil,
        priority: String? = nil, expiration: String? = nil, collapseID: String? = nil, apnsID: String? = nil,
        payloadJSON: some Collection<UInt8>
    ) throws(APNsInvalidRequest) -> APNsRequest {
        var problems: [APNsRequestProblem] = []
        var channel: ChannelID?
        do { channel = try ChannelID(channelID) } catch { problems.append(error) }
        var request: APNsRequest?
        do {
            // The device parser checks every other field; its stand-in token is replaced by the channel.
            request = try parse(
                deviceToken: standInToken, environment: environment, bundleOrTopic: bundleOrTopic,
                pushType: pushType ?? PushType.liveactivity.rawValue, priority: priority, expiration: expiration,
                collapseID: collapseID, apnsID: apnsID, payloadJSON: payloadJSON)
        } catch {
            problems += error.problems
        }
        if var request, let channel {
            request.target = .channel(channel)
            problems += request.validate()
            if problems.isEmpty { return request }
        } else if let type = try? PushType(parsing: pushType ?? "liveactivity"), type != .liveactivity {
            problems.append(
                APNsRequestProblem(
                    .channelPushTypeNotAllowed, field: "apns-push-type",
                    "broadcasts on a channel are Live Activity updates only; use push type liveactivity, not \(type)"))
        }
        throw APNsInvalidRequest(problems: problems)
    }

    private static let standInToken = String(repeating: "0", count: 64)
}
