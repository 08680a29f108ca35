// Event patterns in the style of Amazon EventBridge and SNS filter policies: the pattern has the shape
// of the event, keys AND, a list of values ORs, and operator objects test one value. Loading turns the
// nested pattern into flat conditions on key paths, so matching is a short walk per condition.

import APNs
import JSON

/// A compiled pattern: every condition must hold.
struct EventPattern: Sendable {
    let conditions: [MatchCondition]

    func matches(_ event: JSONNode) -> Bool {
        // By index, where the conditions lie: `for condition in conditions` copied each one it passed (its
        // path and tests retained and released for every event).
        conditions.withUnsafeBufferPointer { conditions in
            for index in conditions.indices where !conditions[index].matches(event) { return false }
            return true
        }
    }

    func explain(_ event: JSONNode) -> [ConditionExplanation] {
        conditions.map { $0.explain(event) }
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

    func matches(_ event: JSONNode) -> Bool {
        switch test {
        case .anyOf(let alternatives):
            for alternative in alternatives where alternative.matches(event) { return true }
            return false
        case .values(let tests):
            var found = false
            if Self.anyValue(at: path, from: 0, in: event, found: &found, where: tests) { return true }
            if !found {
                for test in tests { if case .exists(false) = test { return true } }
            }
            return false
        }
    }

    /// Walks `path` from `step`, descending into every element of any array on the way (and at the
    /// end), as EventBridge does; true when some value there passes one of `tests`.
    private static func anyValue(
        at path: [String], from step: Int, in value: JSONNode, found: inout Bool,
        where tests: [ValueTest]
    ) -> Bool {
        if value.isArray {
            for element in value.elements where anyValue(at: path, from: step, in: element, found: &found, where: tests)
            {
                return true
            }
            return false
        }
        if step < path.count {
            guard let next = value[path[step]] else { return false }
            return anyValue(at: path, from: step + 1, in: next, found: &found, where: tests)
        }
        found = true
        for test in tests where test.matches(value) { return true }
        return false
    }

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

    func explain(_ event: JSONNode) -> ConditionExplanation {
        let matched = matches(event)
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

    func matches(_ value: JSONNode) -> Bool {
        switch self {
        case .equals(let expected):
            switch (expected, value.kind) {
            case (.string(let text), .string): return value.isText(text)
            case (.int(let a), .int): return a == value.intValue
            case (.int, .double), (.double, .int), (.double, .double): return expected.doubleValue == value.doubleValue
            case (.bool(let a), .bool): return a == value.boolValue
            case (.null, .null): return true
            default: return false
            }
        case .prefix(let prefix):
            return value.withUTF8 { $0.starts(with: prefix.utf8) } ?? false
        case .suffix(let suffix):
            return value.withUTF8 { $0.reversed().starts(with: suffix.utf8.reversed()) } ?? false
        case .equalsIgnoreCase(let lowered):
            guard let string = value.stringValue else { return false }
            return string.lowercased() == lowered
        case .anythingBut(let tests):
            for test in tests where test.matches(value) { return false }
            return true
        case .numeric(let bounds):
            guard let number = value.doubleValue else { return false }
            for bound in bounds where !bound.admits(number) { return false }
            return true
        case .exists(let shouldExist):
            return shouldExist
        }
    }

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
