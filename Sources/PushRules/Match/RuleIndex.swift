// Most rules name the event types they handle (`type: chat.message`). Indexing rules by those
// types means an event is tested only against the rules that can match it, in file order, so
// matching stays fast however many rules a file has.

import APNs
import JSON

struct RuleIndex: Sendable {
    /// The types some rule names exactly, and for each the rules that can match an event of that type.
    /// Searched by the type's bytes where they lie in the event, against all the names' bytes in one array:
    /// a dictionary needs the type as a `String` (an allocation for any type longer than 15 bytes, such as
    /// `order.delivery_update`), and a walk over `String`s retains each one it passes.
    private let typeNames: [String]
    private let typeBytes: [UInt8]
    private let typeRanges: [Range<Int>]
    private let typeRules: [[Int]]
    /// Whether some name is not all ASCII: then texts with other bytes may still be the same text.
    private let hasNonASCIIName: Bool
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
        let sorted = byType.sorted { $0.key < $1.key }
        typeNames = sorted.map(\.key)
        typeRules = sorted.map(\.value)
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for name in typeNames {
            let start = bytes.count
            bytes.append(contentsOf: name.utf8)
            ranges.append(start..<bytes.count)
        }
        typeBytes = bytes
        typeRanges = ranges
        hasNonASCIIName = bytes.contains { $0 >= 0x80 }
    }

    /// The rules, in file order, that could match `event`.
    func candidates(for event: JSONNode) -> [Int] {
        guard let type = event["type"] else { return unrestricted }
        // An array of types (any element may match) or another value: test every rule.
        guard let name = type.withUTF8({ rules(named: $0) }) else { return all }
        return name ?? unrestricted
    }

    /// The rules for the type named by `name`'s bytes; nil when no rule names it exactly.
    private func rules(named name: UnsafeBufferPointer<UInt8>) -> [Int]? {
        let found = typeBytes.withUnsafeBufferPointer { bytes in
            typeRanges.withUnsafeBufferPointer { ranges -> Int? in
                ranges.indices.first { ASCIIBytes.equal(UnsafeBufferPointer(rebasing: bytes[ranges[$0]]), name) }
            }
        }
        if let found { return typeRules[found] }
        // Other bytes can be the same text only in another Unicode form (é as one scalar or as e and an accent).
        guard hasNonASCIIName || name.contains(where: { $0 >= 0x80 }) else { return nil }
        let text = String(decoding: name, as: UTF8.self)
        return typeNames.firstIndex(of: text).map { typeRules[$0] }
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
