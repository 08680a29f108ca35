// Compiling `match` patterns: nested mappings become conditions on key paths; lists OR; operator
// objects ({prefix: ...}, {numeric: [...]}, ...) test one value; `$or` lists alternative patterns.

import APNs
import JSON

extension RulesFileDecoder {
    static let operators = ["prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists"]

    mutating func decodePattern(_ node: SourceNode, prefix: [String]) -> [MatchCondition] {
        let place = prefix.isEmpty ? "match" : prefix.joined(separator: ".")
        guard let entries = mapping(node, place, example: "match: {type: chat.message, data: {priority: [high]}}")
        else { return [] }
        var conditions: [MatchCondition] = []
        for entry in entries {
            if entry.key == "$or" {
                guard let alternatives = entry.value.elements, !alternatives.isEmpty else {
                    report(entry.value.position, "$or takes a list of patterns, e.g. $or: [{type: a}, {data: {b: 1}}]")
                    continue
                }
                let patterns = alternatives.map { EventPattern(conditions: decodePattern($0, prefix: prefix)) }
                conditions.append(MatchCondition(path: prefix, test: .anyOf(patterns), position: entry.keyPosition))
            } else if entry.key.hasPrefix("$") {
                report(entry.keyPosition, "unknown '\(entry.key)' in a pattern; the only $ key is $or")
            } else {
                conditions += decodeCondition(entry.value, path: prefix + [entry.key], position: entry.keyPosition)
            }
        }
        return conditions
    }

    mutating func decodeCondition(_ node: SourceNode, path: [String], position: SourcePosition) -> [MatchCondition] {
        let name = path.joined(separator: ".")
        switch node.content {
        case .scalar:
            guard let test = exactValue(node, path: name) else { return [] }
            return [MatchCondition(path: path, test: .values([test]), position: position)]
        case .sequence(let elements):
            if elements.isEmpty {
                report(node.position, "\(name): an empty list matches nothing; list the values to match")
                return []
            }
            var tests: [ValueTest] = []
            for element in elements {
                switch element.content {
                case .scalar:
                    if let test = exactValue(element, path: name) { tests.append(test) }
                case .mapping(let entries):
                    if let test = operatorTest(entries, at: element.position, path: name) { tests.append(test) }
                case .sequence:
                    report(element.position, "\(name): a list inside a list; list values or operators directly")
                }
            }
            return [MatchCondition(path: path, test: .values(tests), position: position)]
        case .mapping(let entries):
            if entries.count > 1, entries.allSatisfy({ Self.operators.contains($0.key) }) {
                _ = operatorTest(entries, at: node.position, path: name)
                return []
            }
            if entries.count == 1, Self.operators.contains(entries[0].key) {
                guard let test = operatorTest(entries, at: node.position, path: name) else { return [] }
                return [MatchCondition(path: path, test: .values([test]), position: position)]
            }
            if entries.count == 1, entries[0].value.elements == nil,
                let operatorName = Spelling.closest(to: entries[0].key, among: Self.operators),
                !entries[0].key.contains(".")
            {
                report(
                    entries[0].keyPosition,
                    "\(name): unknown operator '\(entries[0].key)'; did you mean "
                        + "'\(operatorName)'? (to match an event field named '\(entries[0].key)', write its values "
                        + "as a list)")
                return []
            }
            if entries.isEmpty {
                report(
                    node.position,
                    "\(name): an empty mapping matches nothing; use {exists: true} to require "
                        + "the field")
                return []
            }
            return decodePattern(node, prefix: path)
        }
    }

    private mutating func exactValue(_ node: SourceNode, path: String) -> ValueTest? {
        guard case .scalar(let text, _, let value) = node.content else { return nil }
        if node.isYAML11OnlyBoolean {
            report(
                node.position,
                "\(path): \(text) is read as the boolean \(value.compactString) in YAML 1.1; "
                    + "write \(value.compactString) for the boolean, or \"\(text)\" in quotes for the text")
            return nil
        }
        return .equals(value)
    }

    private mutating func operatorTest(_ entries: [SourceEntry], at position: SourcePosition, path: String)
        -> ValueTest?
    {
        guard entries.count == 1 else {
            report(
                position,
                "\(path): an operator object has exactly one key, one of "
                    + Self.operators.joined(separator: ", ") + "; to combine, list them: [{prefix: a}, {suffix: b}]")
            return nil
        }
        let entry = entries[0]
        let value = entry.value
        func text() -> String? {
            guard let string = value.scalarValue?.stringValue, !string.isEmpty else {
                report(value.position, "\(path): \(entry.key) takes a non-empty text, e.g. {\(entry.key): \"chat.\"}")
                return nil
            }
            return string
        }
        switch entry.key {
        case "prefix": return text().map { .prefix($0) }
        case "suffix": return text().map { .suffix($0) }
        case "equals-ignore-case": return text().map { .equalsIgnoreCase($0.lowercased()) }
        case "exists":
            guard let flag = value.scalarValue?.boolValue, !value.isYAML11OnlyBoolean else {
                report(value.position, "\(path): exists takes true or false")
                return nil
            }
            return .exists(flag)
        case "numeric": return numericTest(value, path: path)
        case "anything-but": return anythingBut(value, path: path)
        default:
            report(
                entry.keyPosition,
                "\(path): unknown operator '\(entry.key)'"
                    + Spelling.suggestion(for: entry.key, among: Self.operators) + "; operators: "
                    + Self.operators.joined(separator: ", "))
            return nil
        }
    }

    private mutating func numericTest(_ node: SourceNode, path: String) -> ValueTest? {
        let usage = "numeric takes one or two comparisons, e.g. {numeric: [\">=\", 1, \"<\", 10]}"
        guard let elements = node.elements, elements.count == 2 || elements.count == 4 else {
            report(node.position, "\(path): \(usage)")
            return nil
        }
        var bounds: [NumericBound] = []
        for pair in stride(from: 0, to: elements.count, by: 2) {
            let symbol = elements[pair].scalarValue?.stringValue ?? ""
            guard let comparison = NumericBound.Comparison(rawValue: symbol) else {
                report(
                    elements[pair].position,
                    "\(path): '\(symbol)' is not a comparison; use one of "
                        + NumericBound.Comparison.allCases.map(\.rawValue).joined(separator: " "))
                return nil
            }
            guard let number = elements[pair + 1].scalarValue?.doubleValue else {
                report(
                    elements[pair + 1].position,
                    "\(path): \(symbol) needs a number, found "
                        + describeScalar(elements[pair + 1]))
                return nil
            }
            bounds.append(NumericBound(comparison: comparison, operand: number))
        }
        return .numeric(bounds)
    }

    private mutating func anythingBut(_ node: SourceNode, path: String) -> ValueTest? {
        switch node.content {
        case .scalar:
            return exactValue(node, path: path).map { .anythingBut([$0]) }
        case .sequence(let elements):
            var tests: [ValueTest] = []
            for element in elements {
                guard element.scalarValue != nil, let test = exactValue(element, path: path) else {
                    report(element.position, "\(path): anything-but lists plain values")
                    continue
                }
                tests.append(test)
            }
            return tests.isEmpty ? nil : .anythingBut(tests)
        case .mapping(let entries):
            let allowed = ["prefix", "suffix", "equals-ignore-case"]
            guard entries.count == 1, allowed.contains(entries[0].key) else {
                report(
                    node.position,
                    "\(path): anything-but takes a value, a list of values, or one of "
                        + "{prefix: ...}, {suffix: ...}, {equals-ignore-case: ...}")
                return nil
            }
            return operatorTest(entries, at: node.position, path: path).map { .anythingBut([$0]) }
        }
    }
}
