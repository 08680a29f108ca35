// One notification to one device or one broadcast channel, and its rendering into exactly what goes on
// the wire.

import HTTP2
public import JSON
import Platform

/// Where a notification goes: one device (`POST /3/device/<token>`) or every device subscribed to a
/// broadcast channel (`POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`; Apple, "Sending
/// broadcast push notification requests to APNs", iOS 18 Live Activities only).
public enum APNsTarget: Sendable, Hashable, CustomStringConvertible {
    case device(DeviceToken)
    case channel(ChannelID)

    public var isChannel: Bool {
        if case .channel = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .device(let token): return "device \(token.hex)"
        case .channel(let id): return "channel \(id.value)"
        }
    }
}

/// A notification for one device or one broadcast channel: the typed headers and the JSON payload.
///
/// Values are checked where they are typed (`DeviceToken`, `APNsPriority`, ...); what depends on
/// several fields together (priority for the push type, topic suffix, payload rules) is checked by
/// `validate()`. A value type; safe to share across threads.
public struct APNsRequest: Sendable, Hashable {
    /// The device (the path's last component) or the broadcast channel (the `apns-channel-id` header).
    /// Another device keeps the remembered header checks (a rule's copies per device); a change between a
    /// device and a channel forgets them (a broadcast's push type is checked).
    public var target: APNsTarget {
        didSet { if oldValue.isChannel != target.isChannel { headersKnownValid = false } }
    }
    /// The device token, for a device request; nil for a broadcast.
    public var deviceToken: DeviceToken? {
        if case .device(let token) = target { return token }
        return nil
    }
    /// The channel, for a broadcast; nil for a device request.
    public var channelID: ChannelID? {
        if case .channel(let id) = target { return id }
        return nil
    }
    /// Which APNs service: a token (or channel) only works in the one it came from.
    public var environment: APNsEnvironment
    /// The full `apns-topic`, suffix included (see `PushType.topic(forBundle:)`). A broadcast sends no
    /// `apns-topic`: its bundle id (the topic without the suffix) is the path's last component.
    public var topic: String { didSet { headersKnownValid = false } }
    /// The `apns-push-type` header.
    public var pushType: PushType { didSet { headersKnownValid = false } }
    /// The `apns-priority` header, always sent.
    public var priority: APNsPriority { didSet { headersKnownValid = false } }
    /// The `apns-expiration` header; `.none` leaves it out.
    public var expiration: APNsExpiration { didSet { headersKnownValid = false } }
    /// The header checks of `validate()` (topic, priority for the push type, expiration) passed for
    /// the current values: set by `validateRemembering()`, cleared when any of those fields changes.
    /// The environment, collapse id and apns-id are not part of them, so the copies a
    /// rule makes per device and per retry skip those checks.
    private var headersKnownValid = false
    /// The `apns-collapse-id` header; nil leaves it out.
    public var collapseID: CollapseID?
    /// The id of this attempt. A retry must use a fresh one (`APNsID.random()`).
    public var apnsID: APNsID
    /// The payload, rendered compact on the wire.
    public var payload: JSONValue {
        get { encodedPayload.value }
        set { encodedPayload = EncodedPayload(newValue) }
    }

    /// The problems `validate()` finds in the payload for this request's push type, topic and target
    /// (remembered with the payload).
    package var payloadProblems: [APNsRequestProblem] { encodedPayload.problems(for: payloadCheck) }

    /// The payload with its compact bytes, encoded once and shared by copies: the requests of one
    /// event's devices (and every retry) send the same payload, so it is serialised and checked once.
    var encodedPayload: EncodedPayload

    /// - Parameters:
    ///   - topic: the full topic; use `pushType.topic(forBundle:)` to make one from a bundle id.
    ///   - priority: nil means the push type's `defaultPriority`.
    ///   - apnsID: defaults to a fresh random id.
    public init(
        deviceToken: DeviceToken, environment: APNsEnvironment, topic: String, pushType: PushType = .alert,
        priority: APNsPriority? = nil, expiration: APNsExpiration = .none, collapseID: CollapseID? = nil,
        apnsID: APNsID = .random(), payload: JSONValue
    ) {
        self.target = .device(deviceToken)
        self.environment = environment
        self.topic = topic
        self.pushType = pushType
        self.priority = priority ?? pushType.defaultPriority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.encodedPayload = EncodedPayload(payload)
    }

    /// A device request whose payload a renderer wrote as compact bytes directly, knowing the payload's
    /// problems for this push type and topic without a value to check (the rules' payload programs):
    /// the value is made by `makePayload` only if something reads `payload`.
    ///
    /// - Precondition: `payloadBytes` is the compact encoding of what `makePayload` returns, and
    ///   `knownPayloadProblems` is what `APNsPayload`'s checks find in it for this push type and topic.
    package init(
        deviceToken: DeviceToken, environment: APNsEnvironment, topic: String, pushType: PushType,
        priority: APNsPriority, expiration: APNsExpiration, collapseID: CollapseID?, apnsID: APNsID,
        payloadBytes: [UInt8], knownPayloadProblems: [APNsRequestProblem],
        makePayload: @escaping @Sendable () -> JSONValue
    ) {
        self.target = .device(deviceToken)
        self.environment = environment
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.encodedPayload = EncodedPayload(
            bytes: payloadBytes, knownProblems: knownPayloadProblems,
            for: EncodedPayload.Check(pushType: pushType, webTopic: APNsPayload.isWebTopic(topic), broadcast: false),
            makeValue: makePayload)
    }

    /// A broadcast on `channel`: push type liveactivity, to the topic of `bundle` (the suffix is added).
    ///
    /// - Parameters:
    ///   - priority: nil means liveactivity's default (10).
    ///   - expiration: Apple: only a channel created with message storage policy 1 keeps a message, so
    ///     only there may it be other than 0; APNs checks that against the channel, not this value.
    public init(
        channel: ChannelID, environment: APNsEnvironment, bundle: String, priority: APNsPriority? = nil,
        expiration: APNsExpiration = .none, apnsID: APNsID = .random(), payload: JSONValue
    ) {
        self.target = .channel(channel)
        self.environment = environment
        self.topic = PushType.liveactivity.topic(forBundle: bundle)
        self.pushType = .liveactivity
        self.priority = priority ?? PushType.liveactivity.defaultPriority
        self.expiration = expiration
        self.collapseID = nil
        self.apnsID = apnsID
        self.encodedPayload = EncodedPayload(payload)
    }

    /// The bundle id a broadcast is addressed to: the topic without the push type's suffix.
    public var bundle: String {
        let suffix = pushType.topicSuffix
        guard !suffix.isEmpty, APNsRequest.hasASCIISuffix(topic, suffix) else { return topic }
        return String(topic.utf8.dropLast(suffix.utf8.count))!
    }

    public static func == (lhs: APNsRequest, rhs: APNsRequest) -> Bool {
        lhs.target == rhs.target && lhs.environment == rhs.environment && lhs.topic == rhs.topic
            && lhs.pushType == rhs.pushType && lhs.priority == rhs.priority && lhs.expiration == rhs.expiration
            && lhs.collapseID == rhs.collapseID && lhs.apnsID == rhs.apnsID
            && (lhs.encodedPayload === rhs.encodedPayload || lhs.payload == rhs.payload)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(target)
        hasher.combine(topic)
        hasher.combine(pushType)
        hasher.combine(apnsID)
        hasher.combine(encodedPayload.bytes)
    }

    /// The compact UTF-8 JSON of the payload, exactly the body that is sent.
    public var payloadBytes: [UInt8] { encodedPayload.bytes }

    /// `/3/device/<hex token>`, or `/4/broadcasts/apps/<bundle id>` for a broadcast.
    public var path: String {
        // Built in one allocation: it is made for every request, and `+` grows the string twice.
        let (prefix, last) = pathParts
        let tail = last.utf8
        return String(unsafeUninitializedCapacity: prefix.utf8CodeUnitCount + tail.count) { buffer in
            let prefixBytes = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            var end = buffer.initialize(fromContentsOf: prefixBytes)
            for byte in tail {
                buffer[end] = byte
                end += 1
            }
            return end
        }
    }

    /// The path's fixed prefix and its last component.
    @inline(__always)
    var pathParts: (StaticString, String) {
        switch target {
        case .device(let token): return ("/3/device/", token.hex)
        // Apple, "Sending broadcast push notification requests to APNs": POST /4/broadcasts/apps/{bundleID}.
        case .channel: return ("/4/broadcasts/apps/", bundle)
        }
    }

    /// `https://<host>/3/device/<hex token>` (or the broadcast path), for printing and curl.
    public var url: String { "https://" + environment.host + path }

    /// Every problem that would make APNs refuse the request or the device ignore it; empty when
    /// the request is good to send.
    public func validate() -> [APNsRequestProblem] {
        var problems: [APNsRequestProblem] = []
        if !headersKnownValid { checkHeaders(&problems) }
        let payloadProblems = encodedPayload.problems(for: payloadCheck)
        if !payloadProblems.isEmpty { problems += payloadProblems }
        return problems
    }

    /// What the payload's problems depend on besides the payload: the push type, whether the topic is
    /// a Safari website push ID (`web.` topics have payload rules of their own), and whether it is a
    /// broadcast.
    var payloadCheck: EncodedPayload.Check {
        EncodedPayload.Check(
            pushType: pushType, webTopic: APNsPayload.isWebTopic(topic), broadcast: target.isChannel)
    }

    /// `validate()`, remembering in this value (and the copies made from it) that the headers passed,
    /// so that the sender's own `validate()` of a copy only looks up the payload's remembered answer.
    /// The payload's answer is remembered with the payload, for every request that shares it.
    public mutating func validateRemembering() -> [APNsRequestProblem] {
        var problems: [APNsRequestProblem] = []
        if !headersKnownValid {
            checkHeaders(&problems)
            headersKnownValid = problems.isEmpty
        }
        let payloadProblems = encodedPayload.problems(for: payloadCheck)
        if !payloadProblems.isEmpty { problems += payloadProblems }
        return problems
    }

    private func checkHeaders(_ problems: inout [APNsRequestProblem]) {
        // Apple, "Sending broadcast push notification requests to APNs": apns-push-type must be
        // liveactivity (APNs answers 400 InvalidPushType otherwise).
        if case .channel = target, pushType != .liveactivity {
            problems.append(
                APNsRequestProblem(
                    .channelPushTypeNotAllowed, field: "apns-push-type",
                    "broadcasts on a channel are Live Activity updates only; use push type liveactivity, not \(pushType)"
                ))
        }
        APNsRequest.checkTopic(topic, pushType: pushType, problems: &problems)
        if !pushType.allowedPriorities.contains(priority) {
            let allowed = pushType.allowedPriorities.map(\.headerValue).joined(separator: " or ")
            problems.append(
                APNsRequestProblem(
                    .priorityNotAllowed, field: "apns-priority",
                    "priority \(priority) is not allowed for \(pushType) pushes; use \(allowed)"))
        }
        if let seconds = expiration.unixSeconds, let problem = APNsExpiration.problem(seconds) {
            problems.append(problem)
        }
    }

    /// Topic syntax: a bundle id's characters (A-Z, a-z, 0-9, '-', '.'), with the push type's suffix.
    /// Works on UTF-8 bytes: it runs for every request.
    static func checkTopic(_ topic: String, pushType: PushType, problems: inout [APNsRequestProblem]) {
        // Contiguous bytes (a native string's own; a bridged one is copied): a `String.UTF8View` walk goes
        // through protocol witnesses per byte.
        var contiguous = topic
        contiguous.withUTF8 { checkTopic(topic, bytes: $0, pushType: pushType, problems: &problems) }
    }

    private static func checkTopic(
        _ topic: String, bytes: UnsafeBufferPointer<UInt8>, pushType: PushType,
        problems: inout [APNsRequestProblem]
    ) {
        if bytes.isEmpty {
            problems.append(
                APNsRequestProblem(
                    .topicEmpty, field: "apns-topic",
                    "the topic is empty; use the app's bundle id, such as com.example.app"))
            return
        }
        var previous: UInt8 = UInt8(ascii: ".")
        var emptyPart = false
        var lastPartLength = 0
        for byte in bytes {
            let allowed =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x2E
            if !allowed {
                problems.append(topicCharacterProblem(topic))
                return
            }
            if byte == 0x2E {
                if previous == 0x2E { emptyPart = true }
                lastPartLength = 0
            } else {
                lastPartLength += 1
            }
            previous = byte
        }
        if emptyPart || previous == 0x2E {
            problems.append(
                APNsRequestProblem(
                    .topicInvalid, field: "apns-topic",
                    "topic '\(topic)' has an empty part between dots; use a bundle id such as com.example.app"))
            return
        }
        if pushType == .mdm {
            if !hasASCIIPrefix(topic, "com.apple.mgmt.") {
                problems.append(
                    APNsRequestProblem(
                        .topicSuffixMismatch, field: "apns-topic",
                        "mdm pushes go to the MDM push magic topic from the push certificate, which starts with "
                            + "com.apple.mgmt. (as com.apple.mgmt.External.<uuid>); '\(topic)' does not"))
            }
            return
        }
        let suffix = pushType.topicSuffix
        if !suffix.isEmpty {
            if !hasASCIISuffix(bytes, suffix) {
                problems.append(
                    APNsRequestProblem(
                        .topicSuffixMismatch, field: "apns-topic",
                        "\(pushType) pushes go to the topic <bundle id>\(suffix); '\(topic)' lacks the suffix, "
                            + "use '\(pushType.topic(forBundle: topic))'"))
            }
            return
        }
        // Only a topic whose last part is as long as a suffix's last part can carry that suffix; this
        // check runs for every request, and most topics end in a part no suffix has.
        guard lastPartLength < 64, suffixLastPartLengths & (1 << UInt64(lastPartLength)) != 0 else { return }
        // The topic's bytes against the suffixes whose last part is as long as the topic's: a topic such as
        // com.example.chat (whose last part is as long as .voip's) takes this path for every event, and a
        // walk over every push type released each one's suffix, a call to the runtime per push type.
        for (other, partLength) in suffixedTypes
        where partLength == lastPartLength && hasASCIISuffix(bytes, other.topicSuffix) {
            let bundle = String(decoding: bytes.dropLast(other.topicSuffix.utf8.count), as: UTF8.self)
            problems.append(
                APNsRequestProblem(
                    .topicSuffixMismatch, field: "apns-topic",
                    "topic '\(topic)' carries the \(other) suffix '\(other.topicSuffix)', but the push type is "
                        + "\(pushType); send \(pushType) pushes to the bundle id '\(bundle)', or use push type \(other)"
                ))
            return
        }
    }

    /// The lengths of the last dot-separated part of every push type's topic suffix, as bits of a mask.
    private static let suffixLastPartLengths: UInt64 = suffixedTypes.reduce(0) { mask, suffixed in
        mask | (1 << UInt64(suffixed.lastPartLength))
    }

    /// The push types whose topics carry a suffix, each with the length of its suffix's last part.
    private static let suffixedTypes: [(type: PushType, lastPartLength: Int)] = PushType.allCases.compactMap { type in
        guard let part = type.topicSuffix.split(separator: ".").last else { return nil }
        return (type, part.utf8.count)
    }

    /// Byte-wise: `text` is longer than `suffix` and ends with it.
    static func hasASCIISuffix(_ text: String, _ suffix: String) -> Bool {
        text.withUTF8Bytes { hasASCIISuffix($0, suffix) }
    }

    /// Byte-wise: `bytes` are more than `suffix` and end with it.
    static func hasASCIISuffix(_ bytes: UnsafeBufferPointer<UInt8>, _ suffix: String) -> Bool {
        suffix.withUTF8Bytes { suffix in
            bytes.count > suffix.count
                && ASCIIBytes.equal(UnsafeBufferPointer(rebasing: bytes.suffix(suffix.count)), suffix)
        }
    }

    /// Byte-wise: `text` is longer than `prefix` and starts with it.
    static func hasASCIIPrefix(_ text: String, _ prefix: String) -> Bool {
        var text = text
        var prefix = prefix
        return text.withUTF8 { text in
            prefix.withUTF8 { prefix in
                text.count > prefix.count
                    && ASCIIBytes.equal(UnsafeBufferPointer(rebasing: text.prefix(prefix.count)), prefix)
            }
        }
    }

    /// The problem for a topic with a character a bundle id cannot have; names the first one.
    static func topicCharacterProblem(_ topic: String) -> APNsRequestProblem {
        var position = 0
        for scalar in topic.unicodeScalars {
            position += 1
            let v = scalar.value
            let allowed =
                (v >= 0x30 && v <= 0x39) || (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A)
                || v == 0x2D || v == 0x2E
            if !allowed {
                return APNsRequestProblem(
                    .topicInvalid, field: "apns-topic",
                    "\(DeviceToken.describe(scalar)) at position \(position) of topic '\(topic)' cannot be in a "
                        + "bundle id; use letters, digits, '-' and '.' such as com.example.app")
            }
        }
        return APNsRequestProblem(.topicInvalid, field: "apns-topic", "topic '\(topic)' is not a bundle id")
    }
}

/// One HTTP header: a lowercase name and its value.
public struct APNsHeaderField: Sendable, Hashable {
    /// Lowercase, as HTTP/2 requires.
    public var name: String
    /// The value. Headers of a request that passed `validate()` hold no control characters.
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A request exactly as it goes on the wire: pseudo-headers, headers in a stable order, body bytes.
///
/// Headers come in this order: `authorization` (token authentication only), `apns-push-type`,
/// `apns-topic`, `apns-priority`, `apns-expiration` (left out for `.none`), `apns-collapse-id`
/// (when set), `apns-id`. `description` hides the provider token.
public struct APNsWireRequest: Sendable, Hashable, CustomStringConvertible {
    /// `POST`.
    public var method: String
    /// `https`.
    public var scheme: String
    /// The `:authority`: the environment's host. A client talking to another server (a simulator)
    /// replaces it.
    public var authority: String
    /// `/3/device/<hex token>`.
    public var path: String
    /// The regular headers, in the order they go out; see the type's documentation.
    public var headers: [APNsHeaderField]
    /// The compact UTF-8 JSON payload.
    public var body: [UInt8]

    public init(
        method: String, scheme: String, authority: String, path: String, headers: [APNsHeaderField], body: [UInt8]
    ) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// `scheme://authority/path`.
    public var url: String { scheme + "://" + authority + path }

    /// The value of the first header of that (lowercase) name.
    public subscript(header name: String) -> String? {
        for field in headers where field.name == name { return field.value }
        return nil
    }

    /// The request for logs: the authorization header's token replaced by `<redacted>`.
    public var description: String {
        let shown = headers.map { field in
            field.name == "authorization" ? "authorization: bearer <redacted>" : field.name + ": " + field.value
        }
        return "\(method) \(url) [" + shown.joined(separator: ", ") + "] \(body.count) bytes"
    }
}
