// Compiling the values of a rules file: templates (with errors pointing at the exact column where
// possible) and typed fields, whose constant values are checked at load rather than per event.

import APNs
import Foundation
import JSON

extension RulesFileDecoder {
    /// "the boolean no", "a number (3)": how a scalar was read, for messages.
    func describeScalar(_ node: SourceNode) -> String {
        if case .scalar(let text, _, let value) = node.content {
            switch value {
            case .string: return "'\(text)'"
            case .null: return "empty"
            default: return "\(node.kindDescription) \(text)"
            }
        }
        return node.kindDescription
    }

    /// Compiles a text scalar as a template; reports a syntax error at its position.
    mutating func compileTemplate(_ node: SourceNode, field: String) -> Template? {
        guard case .scalar(let text, _, .string) = node.content else {
            report(
                node.position,
                "\(field) must be text, found \(node.kindDescription)"
                    + (node.quotingHint.map { "; \($0)" } ?? ""))
            return nil
        }
        let template: Template
        let keys: [(key: String, offset: Int)]
        do {
            (template, keys) = try TemplateParser.parse(text)
        } catch {
            let (position, suffix) = locate(offset: error.offset, in: node)
            report(position, "\(field): template error: \(error.message)\(suffix)")
            return nil
        }
        for part in template.parts {
            guard case .expression(let expression) = part else { continue }
            let translates = expression.filters.contains { if case .translate = $0 { true } else { false } }
            if compilingLocaleString, translates {
                report(node.position, "\(field): a locale string cannot use | t itself")
            }
        }
        for key in keys {
            translationUses.append((key.key, locate(offset: key.offset, in: node).0, ruleID))
        }
        if template.constantText == nil { templateCount += 1 }
        return template
    }

    /// The file position of a character of a scalar: exact when the scalar is on one line and was written
    /// without escapes, otherwise the scalar's start and a note of the offset.
    func locate(offset: Int, in node: SourceNode) -> (SourcePosition, String) {
        guard case .scalar(let text, let style, _) = node.content else { return (node.position, "") }
        let length = text.unicodeScalars.count
        let singleLine = node.position.line == node.end.line
        let written = node.end.column - node.position.column
        switch style {
        case .plain where singleLine && written == length:
            return (SourcePosition(line: node.position.line, column: node.position.column + offset), "")
        case .singleQuoted where singleLine && written == length + 2,
            .doubleQuoted where singleLine && written == length + 2:
            return (SourcePosition(line: node.position.line, column: node.position.column + 1 + offset), "")
        default:
            return (node.position, " (at character \(offset + 1) of the text)")
        }
    }

    /// A field of a known type. Constant values are converted and checked now; templates when rendered.
    mutating func typedField(_ node: SourceNode, field: String, type: FieldType) -> ValueTemplate? {
        switch node.content {
        case .scalar(_, _, .string(let text)):
            guard let template = compileTemplate(node, field: field) else { return nil }
            if template.constantText == nil { return .template(template, type, field: field) }
            return checkedConstant(.string(text), node: node, field: field, type: type)
        case .scalar(let text, .plain, let value):
            if case .text = type, node.isYAML11OnlyBoolean {
                report(
                    node.position,
                    "\(field): \(text) is read as the boolean \(value.compactString) in YAML 1.1; "
                        + "write it in quotes (\"\(text)\") if you mean the text")
                return nil
            }
            if value.isNull {
                report(node.position, "\(field) is empty; give a value or remove the key")
                return nil
            }
            return checkedConstant(value, node: node, field: field, type: type)
        case .scalar(_, _, let value):
            return checkedConstant(value, node: node, field: field, type: type)
        case .sequence, .mapping:
            switch type {
            case .any, .object:
                if case .object = type, node.entries == nil {
                    report(
                        node.position,
                        "\(field) must be a mapping (or a template giving an object), found "
                            + node.kindDescription)
                    return nil
                }
                return valueTree(node, field: field)
            default:
                report(node.position, "\(field) must be \(describe(type)), found \(node.kindDescription)")
                return nil
            }
        }
    }

    private mutating func checkedConstant(_ value: JSONValue, node: SourceNode, field: String, type: FieldType)
        -> ValueTemplate?
    {
        do {
            return .constant(try type.convert(value, field: field))
        } catch {
            report(node.position, error.message.replacingFirst("the template gave", with: "found"))
            return nil
        }
    }

    func describe(_ type: FieldType) -> String {
        switch type {
        case .any: return "a value"
        case .text: return "text"
        case .integer(let minimum): return "a whole number from \(minimum)"
        case .unitInterval: return "a number from 0 to 1"
        case .number: return "a number"
        case .choice(let choices): return "one of " + choices.joined(separator: ", ")
        case .unixTime: return "UNIX seconds or an RFC 3339 time"
        case .object: return "a mapping"
        }
    }

    /// Any JSON tree whose text leaves may be templates (custom data, content-state, attributes).
    mutating func valueTree(_ node: SourceNode, field: String) -> ValueTemplate? {
        switch node.content {
        case .scalar(_, _, .string(let text)):
            guard let template = compileTemplate(node, field: field) else { return nil }
            return template.constantText == nil ? .template(template, .any, field: field) : .constant(.string(text))
        case .scalar(_, _, let value):
            return .constant(value)
        case .sequence(let elements):
            var output: [ValueTemplate] = []
            for (index, element) in elements.enumerated() {
                if let value = valueTree(element, field: "\(field)[\(index)]") { output.append(value) }
            }
            return .array(output)
        case .mapping(let entries):
            var members: [ValueTemplate.Member] = []
            for entry in entries {
                if let value = valueTree(entry.value, field: "\(field).\(entry.key)") {
                    members.append(.init(key: entry.key, value: value))
                }
            }
            return .object(members)
        }
    }

    /// A boolean flag (`mutable_content: true`).
    mutating func flag(_ node: SourceNode, field: String) -> Bool? {
        if let flag = node.scalarValue?.boolValue, !node.isYAML11OnlyBoolean { return flag }
        report(node.position, "\(field) must be true or false, found \(describeScalar(node))")
        return nil
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = range(of: target) else { return self }
        return replacingCharacters(in: range, with: replacement)
    }
}
