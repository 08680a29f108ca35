// Parses template text into a Template once, when the rules load, checking variables, filters and
// their arguments so that a typo is a load error with its position rather than a failure per event.

import APNs
import JSON

/// A template that cannot be compiled. `offset` counts Unicode scalars from the template's start.
struct TemplateSyntaxError: Error, Sendable {
    var message: String
    var offset: Int
}

struct TemplateParser {
    /// Compiles `source`. `translationKeys` collects every literal key given to `t`, with its offset,
    /// so the loader can check it against the locale tables.
    static func parse(_ source: String) throws(TemplateSyntaxError) -> (Template, [(key: String, offset: Int)]) {
        var parser = TemplateParser(scalars: Array(source.unicodeScalars))
        let parts = try parser.parseParts()
        return (Template(parts: parts, source: source), parser.translationKeys)
    }

    let scalars: [Unicode.Scalar]
    var index = 0
    var translationKeys: [(key: String, offset: Int)] = []

    init(scalars: [Unicode.Scalar]) { self.scalars = scalars }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        index + offset < scalars.count ? scalars[index + offset] : nil
    }

    mutating func parseParts() throws(TemplateSyntaxError) -> [Template.Part] {
        var parts: [Template.Part] = []
        var text = String.UnicodeScalarView()
        while index < scalars.count {
            if scalars[index] == "{", peek(1) == "{" {
                if !text.isEmpty {
                    parts.append(.text(String(text)))
                    text = String.UnicodeScalarView()
                }
                let start = index
                index += 2
                let expression = try parseExpression(start: start)
                parts.append(.expression(expression))
            } else {
                text.append(scalars[index])
                index += 1
            }
        }
        if !text.isEmpty { parts.append(.text(String(text))) }
        return parts
    }

    mutating func parseExpression(start: Int) throws(TemplateSyntaxError) -> TemplateExpression {
        skipSpaces()
        if peek() == "}" && peek(1) == "}" {
            throw TemplateSyntaxError(message: "empty {{ }}; put a value inside, e.g. {{ event.id }}", offset: start)
        }
        let operandStart = index
        let operand = try parseOperand(allowPath: true)
        var filters: [TemplateFilter] = []
        skipSpaces()
        while peek() == "|" {
            index += 1
            skipSpaces()
            let filter = try parseFilter()
            if case .translate = filter {
                if filters.isEmpty, case .literal(.string(let key)) = operand {
                    translationKeys.append((key, operandStart))
                }
            }
            filters.append(filter)
            skipSpaces()
        }
        guard peek() == "}", peek(1) == "}" else {
            if index >= scalars.count {
                throw TemplateSyntaxError(message: "'{{' is never closed; add '}}'", offset: start)
            }
            throw TemplateSyntaxError(
                message: "unexpected '\(describe(index))' in {{ }}; expected '|' and a filter, or '}}'", offset: index)
        }
        let source = String(String.UnicodeScalarView(scalars[(start + 2)..<index]))
        index += 2
        return TemplateExpression(
            operand: operand, filters: filters, source: source.trimmingSpaces())
    }

    mutating func parseOperand(allowPath: Bool) throws(TemplateSyntaxError) -> TemplateOperand {
        guard let scalar = peek() else {
            throw TemplateSyntaxError(message: "a value is missing before the end", offset: index)
        }
        if scalar == "'" || scalar == "\"" { return .literal(.string(try parseString())) }
        if scalar == "-" || ("0"..."9").contains(scalar) { return .literal(try parseNumber()) }
        guard isNameStart(scalar) else {
            throw TemplateSyntaxError(
                message: "unexpected '\(describe(index))'; expected a value such as event.data.text or 'text'",
                offset: index)
        }
        let start = index
        let name = readName()
        switch name {
        case "true": return .literal(.bool(true))
        case "false": return .literal(.bool(false))
        case "null": return .literal(.null)
        default: break
        }
        guard let root = VariablePath.Root(rawValue: name) else {
            let names = VariablePath.Root.allCases.map(\.rawValue)
            throw TemplateSyntaxError(
                message: "unknown variable '\(name)'\(Spelling.suggestion(for: name, among: names)); "
                    + "templates can read event, device and locale",
                offset: start)
        }
        guard allowPath else {
            throw TemplateSyntaxError(message: "a filter argument must be a value", offset: start)
        }
        var steps: [VariablePath.Step] = []
        while true {
            if peek() == "." {
                index += 1
                guard let next = peek(), isNameScalar(next) else {
                    throw TemplateSyntaxError(message: "a name must follow '.'", offset: index)
                }
                let key = readName()
                steps.append(.init(key: key, index: Int(key)))
            } else if peek() == "[" {
                index += 1
                skipSpaces()
                let key: String
                if peek() == "'" || peek() == "\"" {
                    key = try parseString()
                } else if let next = peek(), ("0"..."9").contains(next) {
                    key = readName()
                    guard Int(key) != nil else {
                        throw TemplateSyntaxError(
                            message: "'[\(key)]' is not an index; write [0] or ['key']",
                            offset: index)
                    }
                } else {
                    throw TemplateSyntaxError(message: "expected an index or a quoted key after '['", offset: index)
                }
                skipSpaces()
                guard peek() == "]" else { throw TemplateSyntaxError(message: "expected ']'", offset: index) }
                index += 1
                steps.append(.init(key: key, index: Int(key)))
            } else {
                break
            }
        }
        if root == .locale, !steps.isEmpty {
            throw TemplateSyntaxError(message: "locale is a text (such as fr-CA) and has no fields", offset: start)
        }
        let source = String(String.UnicodeScalarView(scalars[start..<index]))
        return .variable(VariablePath(root: root, steps: steps, source: source))
    }

    mutating func parseFilter() throws(TemplateSyntaxError) -> TemplateFilter {
        let start = index
        guard let scalar = peek(), isNameStart(scalar) else {
            throw TemplateSyntaxError(message: "expected a filter name after '|'", offset: index)
        }
        let name = readName()
        guard let usage = TemplateFilter.usage[name] else {
            throw TemplateSyntaxError(
                message: "unknown filter '\(name)'\(Spelling.suggestion(for: name, among: TemplateFilter.usage.keys)); "
                    + "filters: " + TemplateFilter.usage.keys.sorted().joined(separator: ", "),
                offset: start)
        }
        var arguments: [(TemplateOperand, Int)] = []
        skipSpaces()
        if peek() == "(" {
            index += 1
            skipSpaces()
            if peek() != ")" {
                while true {
                    skipSpaces()
                    let argumentStart = index
                    arguments.append((try parseOperand(allowPath: true), argumentStart))
                    skipSpaces()
                    if peek() == "," {
                        index += 1
                        continue
                    }
                    break
                }
            }
            guard peek() == ")" else {
                throw TemplateSyntaxError(message: "expected ')' to close \(name)(", offset: index)
            }
            index += 1
        }
        func wrongArguments() -> TemplateSyntaxError {
            TemplateSyntaxError(message: "filter \(name) is written \(usage)", offset: start)
        }
        switch name {
        case "default":
            guard arguments.count == 1 else { throw wrongArguments() }
            return .defaultValue(arguments[0].0)
        case "truncate":
            guard arguments.count == 1, case .literal(.int(let length)) = arguments[0].0, length >= 1,
                length <= 100_000
            else {
                throw TemplateSyntaxError(
                    message: "truncate needs a length from 1 up, e.g. truncate(40)",
                    offset: start)
            }
            return .truncate(Int(length))
        case "join":
            if arguments.isEmpty { return .join(", ") }
            guard arguments.count == 1, case .literal(.string(let separator)) = arguments[0].0 else {
                throw TemplateSyntaxError(message: "join takes a quoted separator, e.g. join(', ')", offset: start)
            }
            return .join(separator)
        default:
            guard arguments.isEmpty else {
                throw TemplateSyntaxError(message: "filter \(name) takes no arguments", offset: start)
            }
            switch name {
            case "upper": return .upper
            case "lower": return .lower
            case "trim": return .trim
            case "json": return .json
            case "length": return .length
            default: return .translate
            }
        }
    }

    mutating func parseString() throws(TemplateSyntaxError) -> String {
        let quote = scalars[index]
        let start = index
        index += 1
        var text = String.UnicodeScalarView()
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            if scalar == quote { return String(text) }
            if scalar == "\\", index < scalars.count {
                let escaped = scalars[index]
                index += 1
                switch escaped {
                case "n": text.append("\n")
                case "t": text.append("\t")
                default: text.append(escaped)
                }
                continue
            }
            text.append(scalar)
        }
        throw TemplateSyntaxError(message: "unterminated text literal; close it with \(quote)", offset: start)
    }

    mutating func parseNumber() throws(TemplateSyntaxError) -> JSONValue {
        let start = index
        if peek() == "-" { index += 1 }
        while let scalar = peek(), ("0"..."9").contains(scalar) || scalar == "." { index += 1 }
        let text = String(String.UnicodeScalarView(scalars[start..<index]))
        if let int = Int64(text) { return .int(int) }
        if let double = Double(text), double.isFinite { return .double(double) }
        throw TemplateSyntaxError(message: "'\(text)' is not a number", offset: start)
    }

    mutating func readName() -> String {
        let start = index
        while let scalar = peek(), isNameScalar(scalar) { index += 1 }
        return String(String.UnicodeScalarView(scalars[start..<index]))
    }

    mutating func skipSpaces() {
        while let scalar = peek(), scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" { index += 1 }
    }

    func describe(_ position: Int) -> String {
        position < scalars.count ? String(scalars[position]) : "end"
    }

    private func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
    }

    private func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
        isNameStart(scalar) || ("0"..."9").contains(scalar) || scalar == "-"
    }
}

extension String {
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while slice.first == " " { slice = slice.dropFirst() }
        while slice.last == " " { slice = slice.dropLast() }
        return String(slice)
    }
}
