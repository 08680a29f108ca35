// Templates such as "{{ event.data.sender.name | truncate(40) }} wrote" are compiled once, when the
// rules load, into this small AST, and rendered per event straight into JSON values: output is never
// made by pasting text into JSON, so nothing in an event can break or inject into a payload.

import APNs
import JSON

/// A compiled template. A template that is one expression and nothing else keeps the expression's
/// type (number, boolean, object); any other template renders to a string.
struct Template: Sendable {
    enum Part: Sendable {
        case text(String)
        case expression(TemplateExpression)
    }

    let parts: [Part]
    /// The template as written, for messages.
    let source: String

    /// True when the template reads `device`, so it must be rendered once per device rather than per event.
    var readsDevice: Bool {
        parts.contains {
            if case .expression(let e) = $0 { return e.readsDevice }
            return false
        }
    }

    /// True when the template reads the recipient's locale (`locale`, or `| t`), so the locale
    /// fallback chain must be worked out for the event.
    var readsLocale: Bool {
        parts.contains {
            if case .expression(let e) = $0 { return e.readsLocale }
            return false
        }
    }

    /// True when the template has no expression at all.
    var constantText: String? {
        if parts.isEmpty { return "" }
        if parts.count == 1, case .text(let text) = parts[0] { return text }
        return nil
    }

    /// Renders the template. A result of `.null` means "leave this field out" (from `default(null)`).
    func render(_ context: RenderContext) throws(TemplateRenderError) -> JSONValue {
        if parts.count == 1 {
            switch parts[0] {
            case .text(let text): return .string(text)
            case .expression(let expression):
                guard let value = try expression.evaluate(context) else { throw expression.missingError(context) }
                return value
            }
        }
        var output = ""
        for part in parts {
            switch part {
            case .text(let text): output += text
            case .expression(let expression):
                guard let value = try expression.evaluate(context) else { throw expression.missingError(context) }
                try expression.appendText(of: value, to: &output)
            }
        }
        return .string(output)
    }
}

/// An expression between `{{` and `}}`: a value followed by filters.
///
/// A class: compiled once and read for every event, and each template part or text piece that names it
/// is bound per render. As a struct each binding copied its operand, filters and source (a retain each).
final class TemplateExpression: Sendable {
    let operand: TemplateOperand
    let filters: [TemplateFilter]
    /// The expression as written, for messages.
    let source: String

    init(operand: TemplateOperand, filters: [TemplateFilter], source: String) {
        self.operand = operand
        self.filters = filters
        self.source = source
    }

    var readsDevice: Bool {
        operand.readsDevice
            || filters.contains { filter in
                if case .defaultValue(let fallback) = filter { return fallback.readsDevice }
                return false
            }
    }

    var readsLocale: Bool {
        if case .variable(let path) = operand, path.root == .locale { return true }
        return filters.contains { filter in
            switch filter {
            case .translate: return true
            case .defaultValue(.variable(let path)): return path.root == .locale
            default: return false
            }
        }
    }

    /// The value, or nil when it is missing (or null) and no `default` filter supplied one.
    func evaluate(_ context: RenderContext) throws(TemplateRenderError) -> JSONValue? {
        var value = operand.evaluate(context)
        for filter in filters {
            value = try filter.apply(to: value, context: context, expression: self)
        }
        return value
    }

    func appendText(of value: JSONValue, to output: inout String) throws(TemplateRenderError) {
        switch value {
        case .string(let string): output += string
        case .int(let int): output += String(int)
        case .double, .bool: output += value.compactString
        case .null:
            throw TemplateRenderError("{{ \(source) }} is null inside text; give a text default, e.g. default('')")
        case .array:
            throw TemplateRenderError("{{ \(source) }} is a list inside text; use | join(', ') or | json")
        case .object:
            throw TemplateRenderError("{{ \(source) }} is an object inside text; pick a field or use | json")
        }
    }

    func missingError(_ context: RenderContext) -> TemplateRenderError {
        if case .variable(let path) = operand {
            return TemplateRenderError("\(path.describeMissing(in: context)); add | default(...) if it is optional")
        }
        return TemplateRenderError("{{ \(source) }} has no value; add | default(...)")
    }
}

/// The value an expression starts from.
enum TemplateOperand: Sendable {
    case literal(JSONValue)
    case variable(VariablePath)

    var readsDevice: Bool {
        if case .variable(let path) = self { return path.root == .device }
        return false
    }

    /// The value, or nil when missing. JSON null counts as missing so that `default` replaces it.
    func evaluate(_ context: RenderContext) -> JSONValue? {
        switch self {
        case .literal(let value): return value
        case .variable(let path):
            guard let value = path.lookUp(in: context), !value.isNull else { return nil }
            return value
        }
    }
}

/// A path such as `event.data.items[0].name`.
struct VariablePath: Sendable {
    enum Root: String, Sendable, CaseIterable {
        case event, device, locale
    }

    /// A step: an object key, which on an array is read as a decimal index.
    struct Step: Sendable {
        let key: String
        let index: Int?
    }

    let root: Root
    let steps: [Step]
    let source: String

    func lookUp(in context: RenderContext) -> JSONValue? {
        switch root {
        case .event, .device:
            guard let node = lookUpNode(in: context) else {
                // No device (rendering for the whole event): `device` alone is null, as in an event without one.
                return root == .device && context.device == nil && steps.isEmpty ? .null : nil
            }
            return node.value
        case .locale: return steps.isEmpty ? .string(context.locale.tag) : nil
        }
    }

    /// The event's or device's value at the path where it lies; nil for the locale, or when it is missing.
    func lookUpNode(in context: RenderContext) -> JSONNode? {
        let start: JSONNode
        switch root {
        case .event: start = context.event
        case .device:
            guard let device = context.device else { return nil }
            start = device
        case .locale: return nil
        }
        var current = start
        for index in steps.indices {
            if current.isArray {
                guard let element = steps[index].index, let next = current.element(at: element) else { return nil }
                current = next
            } else {
                guard let next = current[steps[index].key] else { return nil }
                current = next
            }
        }
        return current
    }

    /// "event.data.sender.name is missing (event.data.sender has no 'name')", computed only on failure.
    func describeMissing(in context: RenderContext) -> String {
        for count in stride(from: steps.count - 1, through: 0, by: -1) {
            let prefix = VariablePath(root: root, steps: Array(steps.prefix(count)), source: "")
            guard let parent = prefix.lookUp(in: context) else { continue }
            let parentName = ([root.rawValue] + steps.prefix(count).map(\.key)).joined(separator: ".")
            let step = steps[count]
            if count == steps.count - 1, parent[step.key]?.isNull == true {
                return "\(source) is null"
            }
            switch parent {
            case .object: return "\(source) is missing (\(parentName) has no '\(step.key)')"
            case .array(let array):
                return "\(source) is missing (\(parentName) has \(array.count) elements)"
            default: return "\(source) is missing (\(parentName) is \(parent.typeName), not an object)"
            }
        }
        return "\(source) is missing"
    }
}

/// Why a template could not be rendered for an event.
struct TemplateRenderError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// What a template can see: the event, the device being sent to, and the recipient's locale. The event and
/// device are read where they lie in the event's tape: a context lives only as long as the evaluation.
struct RenderContext {
    let event: JSONNode
    /// Nil while rendering what every device shares.
    var device: JSONNode?
    let locale: ResolvedLocale
    /// The event's `occurred_at` in UNIX seconds (the evaluation's `now` when the event has none),
    /// or why it could not be read.
    let eventTime: Result<Int64, TemplateRenderError>
}
