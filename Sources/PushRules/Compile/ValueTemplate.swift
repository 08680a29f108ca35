// A JSON value whose leaves may be templates: the payload of a rule, and its `custom`, `content_state`
// and `attributes` trees. Each template leaf knows the field it fills and the type APNs wants there,
// so a wrong value fails with "alert.badge: ..." instead of a vague payload error later.

import APNs
import JSON

indirect enum ValueTemplate: Sendable {
    struct Member: Sendable {
        let key: String
        let value: ValueTemplate
    }

    case constant(JSONValue)
    case template(Template, FieldType, field: String)
    case object([Member])
    case array([ValueTemplate])
    /// The event's time in UNIX seconds (the default Live Activity `timestamp`).
    case eventTime

    var readsDevice: Bool {
        switch self {
        case .constant, .eventTime: return false
        case .template(let template, _, _): return template.readsDevice
        case .object(let members): return members.contains { $0.value.readsDevice }
        case .array(let elements): return elements.contains { $0.readsDevice }
        }
    }

    var readsLocale: Bool {
        switch self {
        case .constant, .eventTime: return false
        case .template(let template, _, _): return template.readsLocale
        case .object(let members): return members.contains { $0.value.readsLocale }
        case .array(let elements): return elements.contains { $0.readsLocale }
        }
    }

    /// Renders the tree. Members whose template renders null (through `default(null)`) are left out.
    func render(_ context: RenderContext) throws(TemplateRenderError) -> JSONValue {
        switch self {
        case .constant(let value): return value
        case .eventTime: return .int(try context.eventTime.get())
        case .template(let template, let type, let field):
            let value: JSONValue
            do {
                value = try template.render(context)
            } catch {
                throw TemplateRenderError("\(field): \(error.message)")
            }
            if value.isNull { return .null }
            return try type.convert(value, field: field)
        case .object(let members):
            var object = JSONObject()
            for member in members {
                let value = try member.value.render(context)
                if !value.isNull { object.appendUnchecked(member.key, value) }
            }
            return .object(object)
        case .array(let elements):
            var array: [JSONValue] = []
            array.reserveCapacity(elements.count)
            for element in elements {
                let value = try element.render(context)
                if !value.isNull { array.append(value) }
            }
            return .array(array)
        }
    }

    /// The template leaf at a path of object keys, if there is one (for checking `shorten`).
    func leaf(at path: ArraySlice<String>) -> ValueTemplate? {
        guard let key = path.first else { return self }
        guard case .object(let members) = self, let member = members.first(where: { $0.key == key }) else {
            return nil
        }
        return member.value.leaf(at: path.dropFirst())
    }
}

/// The type a field must have once rendered, with the conversions that are safe to make.
enum FieldType: Sendable {
    /// Anything (custom data).
    case any
    /// Text; numbers and booleans become their JSON text.
    case text
    /// A whole number at least `minimum`; text holding one is converted.
    case integer(minimum: Int64)
    /// A number from 0 to 1; text holding one is converted.
    case unitInterval
    /// Any finite number (a Live Activity's relevance score); text holding one is converted.
    case number
    /// One of a few words, such as an interruption level.
    case choice([String])
    /// UNIX seconds: a whole number, or an RFC 3339 text converted to seconds.
    case unixTime
    /// A JSON object.
    case object

    func convert(_ value: JSONValue, field: String) throws(TemplateRenderError) -> JSONValue {
        switch self {
        case .any:
            return value
        case .text:
            switch value {
            case .string: return value
            case .int, .double, .bool: return .string(value.compactString)
            case .array:
                throw TemplateRenderError(
                    "\(field) must be text, but the template gave a list; use | join(', ') "
                        + "or | json")
            default:
                throw TemplateRenderError(
                    "\(field) must be text, but the template gave \(value.typeName); pick a "
                        + "field or use | json")
            }
        case .integer(let minimum):
            let number: Int64?
            if case .string(let text) = value { number = Int64(text.trimmingSpaces()) } else { number = value.intValue }
            guard let number else {
                throw TemplateRenderError("\(field) must be a whole number, but the template gave \(describe(value))")
            }
            guard number >= minimum else {
                throw TemplateRenderError("\(field) must be at least \(minimum), but the template gave \(number)")
            }
            return .int(number)
        case .unitInterval:
            let number: Double?
            if case .string(let text) = value {
                number = Double(text.trimmingSpaces())
            } else {
                number = value.doubleValue
            }
            guard let number, number >= 0, number <= 1 else {
                throw TemplateRenderError(
                    "\(field) must be a number from 0 to 1, but the template gave \(describe(value))")
            }
            return value.doubleValue != nil ? value : .double(number)
        case .number:
            let number: Double?
            if case .string(let text) = value {
                number = Double(text.trimmingSpaces())
            } else {
                number = value.doubleValue
            }
            guard let number, number.isFinite else {
                throw TemplateRenderError("\(field) must be a number, but the template gave \(describe(value))")
            }
            return value.doubleValue != nil ? value : .double(number)
        case .choice(let choices):
            guard case .string(let text) = value, choices.contains(text) else {
                throw TemplateRenderError(
                    "\(field) must be one of \(choices.joined(separator: ", ")), but the template gave "
                        + describe(value))
            }
            return value
        case .unixTime:
            if let seconds = value.intValue, seconds >= 0 { return .int(seconds) }
            if case .string(let text) = value {
                if let seconds = Int64(text) { return .int(seconds) }
                if let seconds = Timestamp.unixSeconds(rfc3339: text) { return .int(seconds) }
            }
            throw TemplateRenderError(
                "\(field) must be UNIX seconds or an RFC 3339 time such as 2026-11-29T12:00:00Z, but the template "
                    + "gave \(describe(value))")
        case .object:
            guard case .object = value else {
                throw TemplateRenderError("\(field) must be an object, but the template gave \(value.typeName)")
            }
            return value
        }
    }

    private func describe(_ value: JSONValue) -> String {
        switch value {
        case .string, .int, .double, .bool: return ConditionExplanation.describe(value)
        default: return value.typeName
        }
    }
}
