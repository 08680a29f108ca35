// Most rules name the event types they handle (`type: chat.message`). Indexing rules by those
// types means an event is tested only against the rules that can match it, in file order, so
// matching stays fast however many rules a file has.

import APNs
import JSON

struct RuleIndex: Sendable {
    /// For each type some rule names exactly: the rules that can match an event of that type.
    private let byType: [String: [Int]]
    /// The rules that do not restrict `type` to exact texts: candidates for every event.
    private let unrestricted: [Int]
    private let all: [Int]

    init(patterns: [EventPattern]) {
        var types: [Int: [String]] = [:]
        for (index, pattern) in patterns.enumerated() {
            if let exact = Self.exactTypes(pattern) { types[index] = exact }
        }
        all = Array(patterns.indices)
        unrestricted = all.filter { types[$0] == nil }
        var byType: [String: [Int]] = [:]
        for name in Set(types.values.joined()) {
            byType[name] = all.filter { types[$0]?.contains(name) ?? true }
        }
        self.byType = byType
    }

    /// The rules, in file order, that could match `event`.
    func candidates(for event: JSONValue) -> [Int] {
        switch event["type"] {
        case .string(let type)?: return byType[type] ?? unrestricted
        case nil: return unrestricted
        default: return all  // an array of types (any element may match) or another value: test every rule
        }
    }

    /// The texts a pattern's top-level `type` condition allows, when it allows only exact texts.
    private static func exactTypes(_ pattern: EventPattern) -> [String]? {
        for condition in pattern.conditions where condition.path == ["type"] {
            guard case .values(let tests) = condition.test else { continue }
            var names: [String] = []
            for test in tests {
                guard case .equals(.string(let name)) = test else {
                    names = []
                    break
                }
                names.append(name)
            }
            if !names.isEmpty { return names }
        }
        return nil
    }
}
