// The event's own `apns` block: explicit values for some APNs fields, which apply only where the
// matching rule accepts them (`accept_overrides`), so a producer cannot, say, raise every push to
// priority 10 unless the operator allowed it.

import APNs
import JSON

/// An APNs field an event may override.
// swift-format-ignore: AlwaysUseLowerCamelCase
// The cases are spelt as the event's `apns` keys, so that the raw values, error messages and docs agree.
enum OverrideField: String, Sendable, CaseIterable {
    case priority
    case expiration
    case collapse_id
    case thread_id
    case badge
    case sound
    case category
    case interruption_level
    case relevance_score

    /// The key inside `aps` for payload fields; nil for header fields.
    var apsKey: String? {
        switch self {
        case .priority, .expiration, .collapse_id: return nil
        case .thread_id: return "thread-id"
        case .badge: return "badge"
        case .sound: return "sound"
        case .category: return "category"
        case .interruption_level: return "interruption-level"
        case .relevance_score: return "relevance-score"
        }
    }

    /// The rule field the override replaces (the same name, for the aps fields).
    var ruleField: String { rawValue }
}

/// The overrides of one event, read and type-checked once.
struct EventOverrides {
    /// Valid values by field.
    var values: [OverrideField: JSONValue] = [:]
    /// Present but of the wrong type or range, with what is wrong.
    var invalid: [OverrideField: String] = [:]
    /// Keys that name no overridable field.
    var unknown: [String] = []

    var isEmpty: Bool { values.isEmpty && invalid.isEmpty && unknown.isEmpty }

    init(_ apns: JSONValue?) {
        guard case .object(let object)? = apns else { return }
        for member in object {
            guard let field = OverrideField(rawValue: member.key) else {
                unknown.append(member.key)
                continue
            }
            let value = member.value
            switch field {
            case .priority:
                if let int = value.intValue, int == 10 || int == 5 || int == 1 {
                    values[field] = .int(int)
                } else {
                    invalid[field] = "apns.priority is \(ConditionExplanation.describe(value)); use 10, 5 or 1"
                }
            case .expiration:
                if let int = value.intValue, int >= 0, int < 100_000_000_000 {
                    values[field] = .int(int)
                } else {
                    invalid[field] = "apns.expiration is \(ConditionExplanation.describe(value)); use 0 or UNIX seconds"
                }
            case .badge:
                if let int = value.intValue, int >= 0 {
                    values[field] = .int(int)
                } else {
                    invalid[field] = "apns.badge is \(ConditionExplanation.describe(value)); use a whole number from 0"
                }
            case .relevance_score:
                // Any number here: 0 to 1 for notifications, any number for Live Activities ("Generating a
                // remote notification"); the request's own validation applies the push type's range.
                if let number = value.doubleValue, number.isFinite {
                    values[field] = value
                } else {
                    invalid[field] =
                        "apns.relevance_score is \(ConditionExplanation.describe(value)); use a number "
                        + "(0 to 1, any number for Live Activities)"
                }
            case .interruption_level:
                if let text = value.stringValue, APNsPayload.interruptionLevels.contains(text) {
                    values[field] = value
                } else {
                    invalid[field] =
                        "apns.interruption_level is \(ConditionExplanation.describe(value)); use one of "
                        + APNsPayload.interruptionLevels.joined(separator: ", ")
                }
            case .collapse_id, .thread_id, .sound, .category:
                if let text = value.stringValue, !text.isEmpty {
                    values[field] = value
                } else {
                    invalid[field] =
                        "apns.\(field.rawValue) is \(ConditionExplanation.describe(value)); "
                        + "use a non-empty text"
                }
            }
        }
    }
}
