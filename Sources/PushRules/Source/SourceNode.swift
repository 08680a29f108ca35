// The document tree of a rules file: YAML or JSON, with the line and column of every node kept so that
// every problem found while loading can point at the text that caused it.

import APNs
import JSON

/// A place in a rules file: 1-based line and column (columns count characters, not bytes).
public struct SourcePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public static func < (lhs: SourcePosition, rhs: SourcePosition) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }

    public var description: String { "\(line):\(column)" }
}

/// How a scalar was written. Only plain scalars are resolved to booleans, numbers and null;
/// anything quoted (or a block scalar, or tagged `!!str`) stays a string.
enum ScalarStyle: Sendable, Hashable {
    case plain
    case singleQuoted
    case doubleQuoted
    case block
}

/// One node of a parsed document.
struct SourceNode: Sendable {
    indirect enum Content: Sendable {
        /// `text` is the scalar as written (after unquoting); `value` is what it resolves to.
        case scalar(text: String, style: ScalarStyle, value: JSONValue)
        case sequence([SourceNode])
        case mapping([SourceEntry])
    }

    var content: Content
    var position: SourcePosition
    /// Where the node ends (just past its last character); for scalars, used to tell whether the
    /// text was written with escapes, so template errors can point at the exact column.
    var end: SourcePosition

    /// The JSON value of this subtree (keys kept as written, scalars resolved).
    var json: JSONValue {
        switch content {
        case .scalar(_, _, let value): return value
        case .sequence(let elements): return .array(elements.map(\.json))
        case .mapping(let entries):
            var object = JSONObject()
            for entry in entries { object.appendUnchecked(entry.key, entry.value.json) }
            return .object(object)
        }
    }

    var entries: [SourceEntry]? {
        if case .mapping(let entries) = content { return entries }
        return nil
    }
    var elements: [SourceNode]? {
        if case .sequence(let elements) = content { return elements }
        return nil
    }

    /// The resolved scalar, or nil for a sequence or mapping.
    var scalarValue: JSONValue? {
        if case .scalar(_, _, let value) = content { return value }
        return nil
    }

    /// For error messages: what kind of thing this node is ("a string", "a mapping").
    var kindDescription: String {
        switch content {
        case .scalar(let text, _, let value):
            if case .bool = value, PushRules.isYAML11OnlyBoolean(text) { return "the boolean \(text)" }
            return value.typeName
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }

    /// True when a plain scalar is one of YAML 1.1's surprising booleans (`yes`, `no`, `on`, `off`).
    var isYAML11OnlyBoolean: Bool {
        if case .scalar(let text, .plain, .bool) = content { return PushRules.isYAML11OnlyBoolean(text) }
        return false
    }

    /// A hint to add when a string was expected and a plain scalar resolved to something else.
    var quotingHint: String? {
        guard case .scalar(let text, .plain, let value) = content else { return nil }
        switch value {
        case .string: return nil
        default: return "write it in quotes (\"\(text)\") if you mean the text"
        }
    }

    func entry(_ key: String) -> SourceEntry? { entries?.first { $0.key == key } }
}

/// A key and its value in a mapping.
struct SourceEntry: Sendable {
    var key: String
    var keyPosition: SourcePosition
    var value: SourceNode
}

func isYAML11OnlyBoolean(_ text: String) -> Bool {
    switch text {
    case "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF": return true
    default: return false
    }
}
