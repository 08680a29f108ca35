// The filters a template expression can apply, e.g. `| truncate(40)`. Missing values pass through
// every filter except `default`, so `{{ x | upper | default('') }}` works as it reads.

import APNs
import JSON

enum TemplateFilter: Sendable {
    case defaultValue(TemplateOperand)
    case truncate(Int)
    case upper
    case lower
    case trim
    case join(String)
    case json
    case length
    /// Looks the value up as a key in the recipient's locale tables and renders that string.
    case translate

    /// Every filter name with its usage, for messages and suggestions.
    static let usage: [String: String] = [
        "default": "default(value)",
        "truncate": "truncate(length)",
        "upper": "upper",
        "lower": "lower",
        "trim": "trim",
        "join": "join(separator)",
        "json": "json",
        "length": "length",
        "t": "t",
    ]

    func apply(to value: JSONValue?, context: RenderContext, expression: TemplateExpression)
        throws(TemplateRenderError) -> JSONValue?
    {
        if case .defaultValue(let fallback) = self {
            if let value { return value }
            return fallback.evaluate(context) ?? (isLiteralNull(fallback) ? .null : nil)
        }
        guard let value else { return nil }
        switch self {
        case .defaultValue: return value
        case .truncate(let length):
            return .string(Self.truncate(try text(value, "truncate", expression), to: length))
        case .upper: return .string(try text(value, "upper", expression).uppercased())
        case .lower: return .string(try text(value, "lower", expression).lowercased())
        case .trim: return .string(Self.trim(try text(value, "trim", expression)))
        case .join(let separator):
            guard case .array(let elements) = value else {
                throw TemplateRenderError("{{ \(expression.source) }}: join needs a list, found \(value.typeName)")
            }
            var output = ""
            for (index, element) in elements.enumerated() {
                if index > 0 { output += separator }
                switch element {
                case .string(let string): output += string
                case .int, .double, .bool: output += element.compactString
                case .null: break
                case .array, .object:
                    throw TemplateRenderError(
                        "{{ \(expression.source) }}: join needs a list of texts or numbers, element \(index) is "
                            + element.typeName)
                }
            }
            return .string(output)
        case .json: return .string(value.compactString)
        case .length:
            switch value {
            case .string(let string): return .int(Int64(string.count))
            case .array(let array): return .int(Int64(array.count))
            case .object(let object): return .int(Int64(object.count))
            default:
                throw TemplateRenderError("{{ \(expression.source) }}: length needs a text, list or object")
            }
        case .translate:
            guard case .string(let key) = value else {
                throw TemplateRenderError("{{ \(expression.source) }}: t needs a text key, found \(value.typeName)")
            }
            return try context.locale.render(key: key, context: context)
        }
    }

    private func isLiteralNull(_ operand: TemplateOperand) -> Bool {
        if case .literal(.null) = operand { return true }
        return false
    }

    /// The value as text for a text filter: strings as they are, numbers and booleans as JSON writes them.
    private func text(_ value: JSONValue, _ name: String, _ expression: TemplateExpression)
        throws(TemplateRenderError) -> String
    {
        switch value {
        case .string(let string): return string
        case .int(let int): return String(int)
        case .double, .bool: return value.compactString
        default:
            throw TemplateRenderError("{{ \(expression.source) }}: \(name) needs a text, found \(value.typeName)")
        }
    }

    /// At most `length` characters (grapheme clusters, so an emoji or accented letter is never split),
    /// ending in "…" when anything was cut.
    static func truncate(_ string: String, to length: Int) -> String {
        // Every character takes at least one byte, so a short enough text needs no counting.
        if string.utf8.count <= length { return string }
        guard let end = string.index(string.startIndex, offsetBy: length, limitedBy: string.endIndex),
            end != string.endIndex
        else { return string }
        var kept = string[..<string.index(string.startIndex, offsetBy: max(0, length - 1))]
        while let last = kept.last, last.isWhitespace { kept = kept.dropLast() }
        return kept + "…"
    }

    static func trim(_ string: String) -> String {
        var slice = Substring(string)
        while let first = slice.first, first.isWhitespace { slice = slice.dropFirst() }
        while let last = slice.last, last.isWhitespace { slice = slice.dropLast() }
        return String(slice)
    }
}
