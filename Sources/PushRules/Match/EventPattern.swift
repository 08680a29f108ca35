// Event patterns in the style of Amazon EventBridge and SNS filter policies: the pattern has the shape
// of the event, keys AND, a list of values ORs, and operator objects test one value. Loading turns the
// nested pattern into flat conditions on key paths, so matching is a short walk per condition.

import APNs
import JSON

/// A compiled pattern: every condition must hold.
struct EventPattern: Sendable {
    let conditions: [MatchCondition]
    /// The conditions as trivial values, for matching without copying them; valid while `storage` lives.
    let matching: MatchingConditions
    private let storage: TrivialStorage

    init(conditions: [MatchCondition]) {
        self.conditions = conditions
        storage = TrivialStorage()
        matching = MatchingConditions(compiling: conditions, into: storage)
    }

    func matches(_ event: JSONNode) -> Bool { matching.matches(event) }

    func explain(_ event: JSONNode) -> [ConditionExplanation] {
        conditions.indices.map { conditions[$0].explain(event, matched: matching.conditionHolds($0, event)) }
    }
}

/// One condition: a test of the values found at a key path (or a `$or` of alternative patterns).
struct MatchCondition: Sendable {
    enum Test: Sendable {
        /// Any value found at the path passes any of the tests.
        case values([ValueTest])
        /// Any of the alternative patterns matches (their paths already include this condition's prefix).
        case anyOf([EventPattern])
    }

    let path: [String]
    let test: Test
    let position: SourcePosition

    /// Every value at the path, for explanations.
    func values(in event: JSONNode) -> [JSONValue] {
        var output: [JSONValue] = []
        func collect(_ path: ArraySlice<String>, _ value: JSONNode) {
            if value.isArray {
                for element in value.elements { collect(path, element) }
                return
            }
            guard let key = path.first else { return output.append(value.value) }
            if let next = value[key] { collect(path.dropFirst(), next) }
        }
        collect(path[...], event)
        return output
    }

    /// Why the condition did or did not match `event`; `matched` is the matcher's answer.
    func explain(_ event: JSONNode, matched: Bool) -> ConditionExplanation {
        switch test {
        case .anyOf(let alternatives):
            return ConditionExplanation(
                path: path.joined(separator: "."), expectation: "matches one of \(alternatives.count) $or patterns",
                actual: "", matched: matched, position: position,
                alternatives: alternatives.map { $0.explain(event) })
        case .values(let tests):
            let found = values(in: event)
            let actual: String
            if found.isEmpty {
                actual = "missing"
            } else {
                let shown = found.prefix(5).map { ConditionExplanation.describe($0) }.joined(separator: ", ")
                actual = found.count > 5 ? "\(shown), … (\(found.count) values)" : shown
            }
            let expectation = tests.map(\.description).joined(separator: " or ")
            return ConditionExplanation(
                path: path.joined(separator: "."), expectation: expectation, actual: actual, matched: matched,
                position: position, alternatives: [])
        }
    }
}

/// A test of one value.
enum ValueTest: Sendable, CustomStringConvertible {
    case equals(JSONValue)
    case prefix(String)
    case suffix(String)
    /// The operand is stored lowercased.
    case equalsIgnoreCase(String)
    /// Passes when the value is present and passes none of the tests.
    case anythingBut([ValueTest])
    case numeric([NumericBound])
    case exists(Bool)

    var description: String {
        switch self {
        case .equals(let value): return "is \(ConditionExplanation.describe(value))"
        case .prefix(let prefix): return "starts with \(ConditionExplanation.describe(.string(prefix)))"
        case .suffix(let suffix): return "ends with \(ConditionExplanation.describe(.string(suffix)))"
        case .equalsIgnoreCase(let text): return "is \(ConditionExplanation.describe(.string(text))) ignoring case"
        case .anythingBut(let tests):
            return "is present and not (" + tests.map(\.description).joined(separator: " or ") + ")"
        case .numeric(let bounds): return "is a number " + bounds.map(\.description).joined(separator: " and ")
        case .exists(let shouldExist): return shouldExist ? "exists" : "does not exist"
        }
    }
}

/// One side of a numeric range, e.g. `>= 5`.
struct NumericBound: Sendable, CustomStringConvertible {
    enum Comparison: String, Sendable, CaseIterable {
        case equal = "="
        case less = "<"
        case lessOrEqual = "<="
        case greater = ">"
        case greaterOrEqual = ">="
    }
    let comparison: Comparison
    let operand: Double

    func admits(_ number: Double) -> Bool {
        switch comparison {
        case .equal: return number == operand
        case .less: return number < operand
        case .lessOrEqual: return number <= operand
        case .greater: return number > operand
        case .greaterOrEqual: return number >= operand
        }
    }

    var description: String {
        let number = operand.rounded() == operand && abs(operand) < 1e15 ? String(Int64(operand)) : String(operand)
        return "\(comparison.rawValue) \(number)"
    }
}

/// Why one condition of a rule did or did not match an event; `rules explain` prints these.
public struct ConditionExplanation: Sendable {
    /// The key path in the event, e.g. `data.sender.name`.
    public var path: String
    /// What the rule asks for, e.g. `starts with "chat."`.
    public var expectation: String
    /// What the event has there, e.g. `"news.digest"` or `missing`.
    public var actual: String
    public var matched: Bool
    /// Where the condition is written in the rules file.
    public var position: SourcePosition
    /// For `$or`: each alternative's conditions.
    public var alternatives: [[ConditionExplanation]]

    /// A short rendering of a value: JSON, cut after 60 characters.
    static func describe(_ value: JSONValue) -> String {
        let text = value.compactString
        return text.count > 60 ? String(text.prefix(59)) + "…" : text
    }
}
