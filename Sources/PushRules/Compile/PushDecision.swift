// What the rules decide for one event: per device, a request to send, or a skip or rejection with a
// reason a person (and the outcome record) can act on. An event never vanishes without an outcome.

public import APNs

/// The rules' answer for one event.
public struct EventDecisions: Sendable {
    /// For each device (in the event's order), one decision per rule that matched; when no rule
    /// matched, one `skip` with reason `no_rule` per device; when the event has no devices, a single
    /// `skip` with reason `no_devices`.
    public var decisions: [PushDecision]
    /// The ids of the rules that matched, in file order. Evaluation stops at the first match unless
    /// that rule says `continue: true`.
    public var matchedRuleIDs: [String]

    public init(decisions: [PushDecision], matchedRuleIDs: [String]) {
        self.decisions = decisions
        self.matchedRuleIDs = matchedRuleIDs
    }
}

/// One decision for one device (or for the whole event when it has no devices).
public enum PushDecision: Sendable {
    case send(PreparedPush)
    case skip(SkippedPush)
    case reject(RejectedPush)

    /// The rule that made the decision; nil for `no_rule` and `no_devices`.
    public var ruleID: String? {
        switch self {
        case .send(let push): return push.ruleID
        case .skip(let skip): return skip.ruleID
        case .reject(let rejection): return rejection.ruleID
        }
    }

    /// The device the decision is for; nil for `no_devices`.
    public var device: DeviceReference? {
        switch self {
        case .send(let push): return push.device
        case .skip(let skip): return skip.device
        case .reject(let rejection): return rejection.device
        }
    }
}

/// The device a decision is for, as the event gave it (the token is not normalised or checked here).
public struct DeviceReference: Sendable, Hashable {
    /// The position in the event's `devices` list, from 0.
    public var index: Int
    /// The `token` as given, when it was a string.
    public var token: String?
    /// The `environment` as given, when it was a string.
    public var environment: String?
    /// For an entry of the event's `channels` (then `index` is its position there): the channel `id`.
    public var channelID: String?

    public init(index: Int, token: String?, environment: String?, channelID: String? = nil) {
        self.index = index
        self.token = token
        self.environment = environment
        self.channelID = channelID
    }
}

/// A request that passed the request model's validation, ready for the sender.
public struct PreparedPush: Sendable {
    public var ruleID: String
    public var device: DeviceReference
    /// Validated. Its `apnsID` is a placeholder: the sender sets a fresh one for every attempt.
    public var request: APNsRequest
    /// Things that did not stop the push but are worth knowing: text shortened to fit, event
    /// overrides the rule does not accept.
    public var notes: [String]
}

/// A push deliberately not sent.
public struct SkippedPush: Sendable {
    public var reason: SkipReason
    public var ruleID: String?
    public var device: DeviceReference?
    /// The push type the rule would have sent (for outcome records); nil for `no_rule`,
    /// `no_devices` and `skip:` rules.
    public var pushType: PushType? = nil
    public var detail: String
}

/// A push that cannot be sent because of the event's content, with every problem found.
public struct RejectedPush: Sendable {
    public var reason: RejectionReason
    public var ruleID: String?
    public var device: DeviceReference?
    /// The push type the rule would have sent (for outcome records).
    public var pushType: PushType?
    public var problems: [String]
}

/// Why a push was skipped; `rawValue` is what outcome records carry.
public struct SkipReason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// No rule matched the event.
    public static let noRule = SkipReason(rawValue: "no_rule")
    /// The event lists no devices.
    public static let noDevices = SkipReason(rawValue: "no_devices")
    /// A rule with `skip:` matched: the operator chose not to notify.
    public static let rule = SkipReason(rawValue: "skipped_by_rule")
    /// The notification's expiration (event time + ttl) has already passed.
    public static let expired = SkipReason(rawValue: "expired")
}

/// Why a push was rejected; `rawValue` is what outcome records carry.
public struct RejectionReason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// Even after shortening the named field, the payload is over the push type's limit.
    public static let payloadTooLarge = RejectionReason(rawValue: "PayloadTooLarge")
    /// A template could not be rendered: a value it needs is missing or of the wrong type.
    public static let templateError = RejectionReason(rawValue: "TemplateError")
    /// The event's `apns` overrides hold a value of the wrong type or range.
    public static let invalidOverride = RejectionReason(rawValue: "InvalidOverride")
    /// The device entry has no usable token or environment.
    public static let invalidDevice = RejectionReason(rawValue: "InvalidDevice")
    /// The request failed the APNs request model's validation.
    public static let invalidRequest = RejectionReason(rawValue: "InvalidRequest")
    /// A field the rules need from the event (such as `occurred_at`) is malformed.
    public static let invalidEvent = RejectionReason(rawValue: "InvalidEvent")
}

/// For `rules explain`: whether a rule matched an event, condition by condition.
public struct RuleExplanation: Sendable {
    public var ruleID: String
    /// Where the rule starts in the file.
    public var position: SourcePosition
    public var matched: Bool
    /// False when an earlier rule matched without `continue: true`, so this rule is never tried.
    public var reached: Bool
    /// The rule's `continue` setting.
    public var continues: Bool
    /// Every condition of the rule's `match`, in the order written.
    public var conditions: [ConditionExplanation]
}
