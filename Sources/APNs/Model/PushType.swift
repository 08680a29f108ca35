// The apns-push-type header and the rules that hang off it: topic suffix, allowed priorities and
// payload limit, each as an Apple page states it (the page is named where the rule is).

/// What kind of notification a request carries; decides the topic suffix, the priorities APNs
/// accepts and the payload limit.
public enum PushType: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case alert
    case background
    case voip
    case complication
    case fileprovider
    case mdm
    case location
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    /// Parses the header value (`alert`, `liveactivity`, ...), ignoring case and surrounding whitespace.
    public init(parsing text: String) throws(APNsRequestError) {
        guard let type = PushType(rawValue: text.lowercased().filter({ !$0.isWhitespace })) else {
            throw APNsRequestError(
                .pushTypeUnknown, field: "apns-push-type",
                "'\(text)' is not an APNs push type; use one of "
                    + PushType.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self = type
    }

    public var description: String { rawValue }

    /// What APNs expects after the bundle id in `apns-topic`; empty for alert, background and mdm
    /// (whose topic is the MDM push magic topic, used as given).
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .location: return ".location-query"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// The priorities APNs accepts for this push type, most urgent first.
    ///
    /// "Sending notification requests to APNs" defines 10, 5 and 1 for every request; only these
    /// push types narrow that down, each on the page named:
    /// - background: "Always use priority 5. Using priority 10 is an error." (Sending notification
    ///   requests to APNs, "Know when to use push types").
    /// - liveactivity: "Set the value for the apns-priority header field to 5 or 10" (Starting and
    ///   updating Live Activities with ActivityKit push notifications), for device and channel pushes.
    /// - pushtotalk: priority 10 with expiration 0, for immediate delivery (Creating a Push to Talk app,
    ///   "Receive audio").
    /// Apple states no narrower rule for the others (alert and location only advise 10 or 5; voip,
    /// complication, fileprovider, mdm, widgets and controls say nothing), so they take all three.
    public var allowedPriorities: [APNsPriority] {
        switch self {
        case .background: return PushType.onlyConsiderPower
        case .pushtotalk: return PushType.onlyImmediately
        case .liveactivity: return PushType.immediatelyOrConsiderPower
        case .alert, .voip, .complication, .fileprovider, .mdm, .location, .widgets, .controls:
            return PushType.anyPriority
        }
    }

    private static let onlyConsiderPower: [APNsPriority] = [.considerPower]
    private static let onlyImmediately: [APNsPriority] = [.immediately]
    private static let immediatelyOrConsiderPower: [APNsPriority] = [.immediately, .considerPower]
    private static let anyPriority: [APNsPriority] = [.immediately, .considerPower, .lowest]

    /// Whether APNs takes this push type only with token authentication: "The location push type
    /// supports only token-based authentication" (Sending notification requests to APNs), and File
    /// Provider pushes "use provider authentication tokens (not provider certificates)" (Using push
    /// notifications to signal changes).
    public var requiresTokenAuthentication: Bool { self == .location || self == .fileprovider }

    /// The priority used when a request names none: 10, Apple's default when the header is left out,
    /// except 5 where 10 is not allowed (background).
    public var defaultPriority: APNsPriority { allowedPriorities[0] }

    /// The largest payload APNs accepts, in bytes of compact UTF-8 JSON: 5120 for voip, 4096 otherwise.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    /// The `apns-topic` for a bundle id: the bundle id plus `topicSuffix`, unless it already ends
    /// with the suffix. For mdm the topic is the push magic topic and is returned unchanged.
    public func topic(forBundle bundle: String) -> String {
        let suffix = topicSuffix
        if suffix.isEmpty || APNsRequest.hasASCIISuffix(bundle, suffix) { return bundle }
        return bundle + suffix
    }
}

/// The apns-priority header: how urgently APNs should deliver.
public struct APNsPriority: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 10, 5 or 1.
    public let rawValue: Int

    /// 10: deliver now.
    public static let immediately = APNsPriority(checked: 10)
    /// 5: deliver when it suits the device's power state.
    public static let considerPower = APNsPriority(checked: 5)
    /// 1: deliver only when the device is awake anyway.
    public static let lowest = APNsPriority(checked: 1)

    private init(checked rawValue: Int) { self.rawValue = rawValue }

    /// Checks a number against the values APNs defines.
    public init(_ value: Int) throws(APNsRequestError) {
        guard value == 10 || value == 5 || value == 1 else {
            throw APNsRequestError(
                .priorityInvalid, field: "apns-priority",
                "\(value) is not an APNs priority; use 10 (immediately), 5 (consider device power) or 1 (lowest)")
        }
        rawValue = value
    }

    /// Parses the header value, as typed on a command line.
    public init(parsing text: String) throws(APNsRequestError) {
        guard let value = Int(text) ?? Int(text.filter { !$0.isWhitespace }) else {
            throw APNsRequestError(
                .priorityInvalid, field: "apns-priority",
                "'\(text)' is not an APNs priority; use 10 (immediately), 5 (consider device power) or 1 (lowest)")
        }
        try self.init(value)
    }

    /// The header value.
    public var headerValue: String {
        switch rawValue {
        case 10: return "10"
        case 5: return "5"
        default: return "1"
        }
    }

    public var description: String { headerValue }

    public static func < (lhs: APNsPriority, rhs: APNsPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
