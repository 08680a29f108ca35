// The apns-push-type header and the rules that hang off it: topic suffix, allowed priorities and
// payload limit, as in Apple's table (see /work/shared/reference/apns.md, "Push types").

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
    public var allowedPriorities: [APNsPriority] {
        switch self {
        case .background, .fileprovider: return PushType.onlyConsiderPower
        case .voip, .pushtotalk: return PushType.onlyImmediately
        case .alert, .complication, .mdm, .location, .liveactivity, .widgets, .controls:
            return PushType.immediatelyOrConsiderPower
        }
    }

    private static let onlyConsiderPower: [APNsPriority] = [.considerPower]
    private static let onlyImmediately: [APNsPriority] = [.immediately]
    private static let immediatelyOrConsiderPower: [APNsPriority] = [.immediately, .considerPower]

    /// The priority used when a request names none: 10, except 5 where 10 is not allowed.
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
