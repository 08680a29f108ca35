// Apple's checks on one request, in order: method, path, duplicate headers, authentication, apns-id,
// push type, topic, priority (the push type's allowed ones: BadPriority), expiration, collapse id,
// payload (with the push type's own rules), device token and its state. The first
// failing check decides the answer, with Apple's status and reason (APNsErrorReason from the model).

import APNs
import JSON

/// A request that passed every check.
struct AcceptedRequest: Sendable, Hashable {
    var deviceToken: String
    /// The apns-id the client sent, if any (echoed back as sent).
    var apnsID: String?
    var pushType: PushType
    var topic: String
    /// The key id of the provider token, for token authentication.
    var keyID: String?
    /// The channel of a broadcast (then `deviceToken` is empty).
    var channelID: String? = nil
}

/// The outcome of validation.
enum ValidationVerdict: Sendable, Hashable {
    case accepted(AcceptedRequest)
    /// Refused with Apple's reason; `apnsID` is the client's id when it was valid, `timestamp` for 410.
    case rejected(APNsErrorReason, apnsID: String?, timestamp: Int64?)

    var reason: APNsErrorReason? {
        if case .rejected(let reason, _, _) = self { return reason }
        return nil
    }
}

/// The reason APNs gives when the body is not a JSON object with an `aps` dictionary. Apple's table
/// has no entry for it; the simulator uses this name (status 400).
let badPayloadReason = APNsErrorReason.unknown("BadPayload")

/// Per-connection facts validation depends on.
struct ConnectionAuthentication: Sendable {
    var providerToken = ProviderTokenConnectionState()
    /// Topics (bundle ids) named by the client certificate, for certificate authentication.
    var certificateTopics: [String] = []
    /// Topics that passed the syntax check on this connection, with their push types (at most
    /// `validTopicsKept`): a connection sends few distinct ones, and the check is the costliest header rule.
    var validTopics: [(topic: String, pushType: PushType)] = []
    static let validTopicsKept = 16
}

/// Validates requests like APNs. Immutable; safe from any thread.
struct RequestValidator: Sendable {
    enum Authentication: Sendable {
        case none
        case providerToken(ProviderTokenAuthenticator)
        case certificate
    }

    let authentication: Authentication
    let devices: DeviceStates
    /// Bundle ids the simulator accepts pushes for; empty accepts any.
    let allowedBundles: Set<String>
    /// The `timestamp` of unregistered tokens that have none configured (ms since 1970).
    let startMilliseconds: Int64
    /// The broadcast channels created through the channel management API.
    var channels = ChannelRegistry()

    static let pathPrefix = "/3/device/"

    /// The APNs headers of a request, found in one pass over its headers.
    private struct APNsHeaders {
        var authorization: String?
        var apnsID: String?
        var pushType: String?
        var topic: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?

        init(_ headers: [APNsHeaderField]) {
            for field in headers {
                switch field.name {
                case "authorization": authorization = field.value
                case "apns-id": apnsID = field.value
                case "apns-push-type": pushType = field.value
                case "apns-topic": topic = field.value
                case "apns-priority": priority = field.value
                case "apns-expiration": expiration = field.value
                case "apns-collapse-id": collapseID = field.value
                default: break
                }
            }
        }
    }

    /// Checks `request`; `now` is UNIX seconds (for provider token ages).
    func validate(_ request: IncomingRequest, connection: inout ConnectionAuthentication, now: Int64)
        -> ValidationVerdict
    {
        let headers = APNsHeaders(request.headers)
        var apnsID: String?
        func reject(_ reason: APNsErrorReason, timestamp: Int64? = nil) -> ValidationVerdict {
            .rejected(reason, apnsID: apnsID, timestamp: timestamp)
        }
        // Echo the client's apns-id in every answer once it is known to be valid.
        if let id = headers.apnsID, (try? APNsID(parsing: id)) != nil { apnsID = id }

        if let path = request.path, path.hasPrefix(Self.broadcastPathPrefix) {
            return validateBroadcast(request, connection: &connection, now: now)
        }
        guard request.method == "POST" else { return reject(.methodNotAllowed) }
        guard let path = request.path, path.hasPrefix(Self.pathPrefix) else { return reject(.badPath) }
        let token = path.utf8.dropFirst(Self.pathPrefix.utf8.count)
        guard !token.isEmpty else { return reject(.missingDeviceToken) }
        let tokenCharacters = Self.classify(token)
        if tokenCharacters == .pathSyntax { return reject(.badPath) }
        if request.duplicateHeaderName != nil { return reject(.duplicateHeaders) }

        var keyID: String?
        switch authentication {
        case .none:
            break
        case .certificate:
            break  // the TLS handshake already required and verified the client certificate
        case .providerToken(let authenticator):
            switch authenticator.check(
                authorization: headers.authorization, connection: &connection.providerToken, now: now)
            {
            case .accepted(let key): keyID = key
            case .rejected(let reason): return reject(reason)
            }
        }

        if headers.apnsID != nil && apnsID == nil { return reject(.badMessageId) }

        guard let pushTypeText = headers.pushType, let pushType = PushType(rawValue: pushTypeText)
        else { return reject(.invalidPushType) }

        var topic = headers.topic
        if topic == nil, case .certificate = authentication, connection.certificateTopics.count == 1 {
            topic = pushType.topic(forBundle: connection.certificateTopics[0])
        }
        guard let topic else { return reject(.missingTopic) }
        if !connection.validTopics.contains(where: { $0.pushType == pushType && $0.topic == topic }) {
            guard topicIsValid(topic, pushType: pushType) else { return reject(.badTopic) }
            if connection.validTopics.count == ConnectionAuthentication.validTopicsKept {
                connection.validTopics.removeFirst()
            }
            connection.validTopics.append((topic, pushType))
        }
        let bundle = pushType == .mdm ? topic : String(topic.utf8.dropLast(pushType.topicSuffix.utf8.count))!
        if case .certificate = authentication, !connection.certificateTopics.isEmpty,
            !connection.certificateTopics.contains(bundle)
        {
            return reject(.topicDisallowed)
        }
        if !allowedBundles.isEmpty && !allowedBundles.contains(bundle) { return reject(.topicDisallowed) }

        if let priorityText = headers.priority {
            guard let priority = Self.priority(priorityText), pushType.allowedPriorities.contains(priority)
            else { return reject(.badPriority) }
        }
        if let expiration = headers.expiration {
            guard !expiration.isEmpty, expiration.utf8.count <= 18,
                expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                (try? APNsExpiration(parsing: expiration)) != nil
            else { return reject(.badExpirationDate) }
        }
        if let collapseID = headers.collapseID, collapseID.utf8.count > CollapseID.maximumByteCount {
            return reject(.badCollapseId)
        }

        if request.bodyLength == 0 { return reject(.payloadEmpty) }
        if request.bodyLength > pushType.payloadLimit { return reject(.payloadTooLarge) }
        switch PayloadShape.inspect(request.body) {
        case .notJSON, .notObject, .object(aps: .other):
            return reject(badPayloadReason)
        case .object(aps: .absent):
            if APNsPayload.requiresAPS(pushType) { return reject(badPayloadReason) }
        case .object(aps: .dictionary):
            // Live Activity events, WidgetKit and control pushes and Safari website pushes have rules of
            // their own (APNsPayload+PushTypes.swift cites Apple's pages); Apple's table names no reason
            // for breaking them, so the simulator answers BadPayload. Parsed only for those pushes.
            if APNsPayload.hasPushTypeRules(pushType, topic: topic) {
                guard let payload = try? JSONValue(parsing: request.body),
                    APNsPayload.pushTypeProblems(payload, pushType: pushType, topic: topic).isEmpty
                else { return reject(badPayloadReason) }
            }
        }

        // The path carries lowercase or uppercase hex; anything else (or a length no token has) is bad.
        guard tokenCharacters == .hex, let deviceToken = try? DeviceToken(String(Substring(token)))
        else { return reject(.badDeviceToken) }
        switch devices.verdict(token: deviceToken.hex, bundle: bundle, startMilliseconds: startMilliseconds) {
        case .badDeviceToken?: return reject(.badDeviceToken)
        case .notForTopic?: return reject(.deviceTokenNotForTopic)
        case .unregistered(let since)?: return reject(.unregistered, timestamp: since)
        case nil: break
        }
        return .accepted(
            AcceptedRequest(
                deviceToken: deviceToken.hex, apnsID: apnsID, pushType: pushType, topic: topic, keyID: keyID))
    }

    /// The three values APNs accepts, exactly as sent on the wire.
    private static func priority(_ text: String) -> APNsPriority? {
        switch text {
        case "10": return .immediately
        case "5": return .considerPower
        case "1": return .lowest
        default: return nil
        }
    }

    /// The topic's syntax and push-type suffix, checked by the model's own request validation so the
    /// simulator and the sender agree on what a good topic is.
    private func topicIsValid(_ topic: String, pushType: PushType) -> Bool {
        let probe = APNsRequest(
            deviceToken: Self.probeToken, environment: .sandbox, topic: topic, pushType: pushType,
            apnsID: Self.probeID, payload: Self.probePayload)
        return !probe.validate().contains { $0.field == "apns-topic" }
    }

    private static let probeToken = try! DeviceToken(String(repeating: "0", count: 64))
    private static let probeID = APNsID(high: 0, low: 0)
    private static let probePayload = JSONValue.object(["aps": .object(["content-available": 1])])

    private enum TokenCharacters { case hex, other, pathSyntax }

    /// One pass over the token part of the path: all hex, something else, or a '/' or '?' that makes
    /// the path itself wrong.
    private static func classify(_ token: Substring.UTF8View) -> TokenCharacters {
        // Contiguous bytes when the path has them (it always does): a UTF8View walk checks every index.
        token.withContiguousStorageIfAvailable { classify(bytes: $0) }
            ?? Array(token).withUnsafeBufferPointer { classify(bytes: $0) }
    }

    private static func classify(bytes token: UnsafeBufferPointer<UInt8>) -> TokenCharacters {
        var result = TokenCharacters.hex
        for byte in token {
            if ASCIIBytes.hexValue(byte) <= 15 { continue }
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") { return .pathSyntax }
            result = .other
        }
        return result
    }
}
