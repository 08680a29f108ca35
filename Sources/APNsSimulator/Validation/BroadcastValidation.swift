// Apple's checks on a broadcast (POST /4/broadcasts/apps/{bundle id}, "Sending broadcast push
// notification requests to APNs"): authentication, push type liveactivity, the channel (missing, not an
// id, not registered), priority, expiration against the channel's storage policy, and the payload.

import APNs
import JSON

extension RequestValidator {
    static let broadcastPathPrefix = "/4/broadcasts/apps/"

    /// Checks a broadcast; `now` is UNIX seconds.
    func validateBroadcast(_ request: IncomingRequest, connection: inout ConnectionAuthentication, now: Int64)
        -> ValidationVerdict
    {
        let requestID = request.header("apns-request-id").flatMap { (try? APNsID(parsing: $0)) != nil ? $0 : nil }
        func reject(_ reason: APNsErrorReason) -> ValidationVerdict {
            .rejected(reason, apnsID: requestID, timestamp: nil)
        }

        guard request.method == "POST" else { return reject(.methodNotAllowed) }
        guard let path = request.path else { return reject(.badPath) }
        let bundle = String(path.dropFirst(Self.broadcastPathPrefix.count))
        guard !bundle.isEmpty, !bundle.contains("/"), !bundle.contains("?") else { return reject(.badPath) }
        if request.duplicateHeaderName != nil { return reject(.duplicateHeaders) }
        let (keyID, refusal) = authenticate(request, bundle: bundle, connection: &connection, now: now)
        if let refusal { return reject(refusal) }
        if request.header("apns-request-id") != nil && requestID == nil { return reject(.badMessageId) }

        // Apple: apns-push-type must be liveactivity for a broadcast.
        guard request.header("apns-push-type") == PushType.liveactivity.rawValue else {
            return reject(.invalidPushType)
        }
        let channel: String
        switch channelHeader(request) {
        case .refused(let reason): return reject(reason)
        case .channel(let id): channel = id
        }
        guard let storagePolicy = channels.storagePolicy(bundle: bundle, channel: channel) else {
            return reject(.channelNotRegistered)
        }

        if let text = request.header("apns-priority") {
            let priority: APNsPriority? =
                switch text {
                case "10": .immediately
                case "5": .considerPower
                case "1": .lowest
                default: nil
                }
            guard let priority, PushType.liveactivity.allowedPriorities.contains(priority) else {
                return reject(.badPriority)
            }
        }
        if let text = request.header("apns-expiration") {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let seconds = Int64(text)
            else { return reject(.badExpirationDate) }
            // A channel with message storage policy 0 ("No Message Stored") keeps nothing to deliver later,
            // so only 0 (deliver now or never) fits it.
            if storagePolicy == 0 && seconds != 0 { return reject(.badExpirationDate) }
        }

        if request.bodyLength == 0 { return reject(.payloadEmpty) }
        if request.bodyLength > PushType.liveactivity.payloadLimit { return reject(.payloadTooLarge) }
        switch PayloadShape.inspect(request.body) {
        case .object(aps: .dictionary): break
        default: return reject(badPayloadReason)
        }
        // A broadcast is a Live Activity update or end: the Live Activity rules hold, and it cannot start
        // one (APNsPayload+PushTypes.swift cites Apple's pages).
        guard let payload = try? JSONValue(parsing: request.body),
            APNsPayload.pushTypeProblems(payload, pushType: .liveactivity, topic: "").isEmpty,
            APNsPayload.validateBroadcast(payload).isEmpty
        else { return reject(badPayloadReason) }
        return .accepted(
            AcceptedRequest(
                deviceToken: "", apnsID: requestID, pushType: .liveactivity,
                topic: PushType.liveactivity.topic(forBundle: bundle), keyID: keyID, channelID: channel))
    }
}
