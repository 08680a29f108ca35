// The channel management API as Apple describes it in "Sending channel management requests to APNs":
// create (POST /1/apps/{bundle}/channels), read (GET, apns-channel-id), delete (DELETE, apns-channel-id)
// and list (GET /1/apps/{bundle}/all-channels), authenticated like pushes, ids in apns-request-id.

import APNs
import JSON

/// What a management request gets, before the engine gives it an id.
struct ChannelManagementAnswer: Sendable {
    var status: Int
    var reason: APNsErrorReason?
    /// The client's `apns-request-id` when it was a UUID (echoed back).
    var requestID: String?
    /// `apns-channel-id` of a created channel.
    var channelID: String?
    var body: [UInt8]?
}

/// The reason the simulator gives for a `message-storage-policy` other than 0 or 1 (the issue's "bad
/// storage policy"; Apple's exact string could not be confirmed, see the report of #15).
let badMessageStoragePolicyReason = APNsErrorReason.unknown("BadMessageStoragePolicy")

/// The `apns-channel-id` of a request, or why it is unusable.
enum ChannelHeader {
    case channel(String)
    case refused(APNsErrorReason)
}

extension RequestValidator {
    static let managementPathPrefix = "/1/apps/"

    /// Answers one management request; `now` is UNIX seconds (for provider token ages).
    func answerChannelManagement(
        _ request: IncomingRequest, connection: inout ConnectionAuthentication, now: Int64
    ) -> ChannelManagementAnswer {
        let requestID = request.header("apns-request-id").flatMap { (try? APNsID(parsing: $0)) != nil ? $0 : nil }
        func reject(_ reason: APNsErrorReason) -> ChannelManagementAnswer {
            ChannelManagementAnswer(status: reason.httpStatus ?? 400, reason: reason, requestID: requestID)
        }
        guard let path = request.path, path.hasPrefix(Self.managementPathPrefix) else { return reject(.badPath) }
        let parts = path.dropFirst(Self.managementPathPrefix.count).split(
            separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1] == "channels" || parts[1] == "all-channels" else {
            return reject(.badPath)
        }
        let bundle = String(parts[0])
        if request.duplicateHeaderName != nil { return reject(.duplicateHeaders) }
        if let reason = authenticate(request, bundle: bundle, connection: &connection, now: now).reason {
            return reject(reason)
        }

        if parts[1] == "all-channels" {
            guard request.method == "GET" else { return reject(.methodNotAllowed) }
            let list = JSONValue.object(["channels": .array(channels.list(bundle: bundle).map { .string($0) })])
            return ChannelManagementAnswer(status: 200, requestID: requestID, body: list.compactBytes)
        }
        switch request.method {
        case "POST":
            guard let body = try? JSONValue(parsing: request.body), case .object = body else {
                return reject(badPayloadReason)
            }
            // The body Apple documents: {"message-storage-policy": 0 | 1, "push-type": "LiveActivity"}.
            guard body["push-type"]?.stringValue == "LiveActivity" else { return reject(.invalidPushType) }
            guard let policy = body["message-storage-policy"]?.intValue, policy == 0 || policy == 1 else {
                return reject(badMessageStoragePolicyReason)
            }
            guard let id = channels.create(bundle: bundle, storagePolicy: Int(policy)) else {
                return reject(.cannotCreateChannelConfig)
            }
            return ChannelManagementAnswer(status: 201, requestID: requestID, channelID: id)
        case "GET", "DELETE":
            let channel: String
            switch channelHeader(request) {
            case .refused(let reason): return reject(reason)
            case .channel(let id): channel = id
            }
            if request.method == "DELETE" {
                guard channels.delete(bundle: bundle, channel: channel) else { return reject(.channelNotRegistered) }
                return ChannelManagementAnswer(status: 204, requestID: requestID)
            }
            guard let policy = channels.storagePolicy(bundle: bundle, channel: channel) else {
                return reject(.channelNotRegistered)
            }
            let body = JSONValue.object([
                "message-storage-policy": .int(Int64(policy)), "push-type": .string("LiveActivity"),
            ])
            return ChannelManagementAnswer(status: 200, requestID: requestID, body: body.compactBytes)
        default:
            return reject(.methodNotAllowed)
        }
    }

    /// The `apns-channel-id` header: missing (MissingChannelId), not base64 (BadChannelId), or the id.
    func channelHeader(_ request: IncomingRequest) -> ChannelHeader {
        guard let raw = request.header("apns-channel-id") else { return .refused(.missingChannelId) }
        guard let id = try? ChannelID(raw), id.value == raw else { return .refused(.badChannelId) }
        return .channel(id.value)
    }

    /// The checks every request of the broadcast APIs shares: the provider token (or the client
    /// certificate's topics) and the simulator's allowed bundles. Returns the key id, or the reason.
    func authenticate(
        _ request: IncomingRequest, bundle: String, connection: inout ConnectionAuthentication, now: Int64
    ) -> (keyID: String?, reason: APNsErrorReason?) {
        var keyID: String?
        switch authentication {
        case .none, .certificate:
            break
        case .providerToken(let authenticator):
            switch authenticator.check(
                authorization: request.header("authorization"), connection: &connection.providerToken, now: now)
            {
            case .accepted(let key): keyID = key
            case .rejected(let reason): return (nil, reason)
            }
        }
        if case .certificate = authentication, !connection.certificateTopics.isEmpty,
            !connection.certificateTopics.contains(bundle)
        {
            return (keyID, .topicDisallowed)
        }
        if !allowedBundles.isEmpty && !allowedBundles.contains(bundle) { return (keyID, .topicDisallowed) }
        return (keyID, nil)
    }
}
