// A JSON value that keeps integers apart from doubles and objects in their key order, so that what
// we send is byte-for-byte predictable (payload size limits are counted on the exact bytes sent).

/// A JSON document as a value.
///
/// Objects keep their members in insertion order; integers that fit in 64 bits stay integers.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// An ordered JSON object. Lookups are linear, which beats hashing for the small objects of
/// notification payloads and events; setting an existing key replaces its value in place.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var members: [Member]

    public init() { members = [] }
    public init(_ members: [Member]) {
        self.members = []
        self.members.reserveCapacity(members.count)
        for member in members { self[member.key] = member.value }
    }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements.map { Member(key: $0.0, value: $0.1) })
    }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    public subscript(key: String) -> JSONValue? {
        get {
            // Keys compared in place: `for member in members` copies each member it passes (a retain and a
            // release of its value's storage, the whole `devices` array or `data` object of an event), and
            // events are read by key dozens of times each (figures: docs/performance.md).
            members.withUnsafeBufferPointer { buffer in
                for index in buffer.indices where Self.isSameName(buffer[index].key, key) { return buffer[index].value }
                return nil
            }
        }
        set {
            if let index = members.firstIndex(where: { Self.isSameName($0.key, key) }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    /// Calls `body` with the value of the member named `key` where it lies, and returns what `body` returns;
    /// nil when there is no such member. A lookup through the subscript copies the value it returns (a
    /// retain of its storage, a release when the copy goes): rules and templates walk paths through events
    /// dozens of times per event, and only the end of a path needs a copy, if any.
    @inlinable
    public func withMember<Result>(_ key: String, _ body: (JSONValue) throws -> Result) rethrows -> Result? {
        try members.withUnsafeBufferPointer { buffer in
            for index in buffer.indices where Self.isSameName(buffer[index].key, key) {
                return try body(buffer[index].value)
            }
            return nil
        }
    }

    /// Whether two member names are the same name. Names of different UTF-8 lengths never are: RFC 8259
    /// (section 8.3) compares names code unit by code unit, so a precomposed and a decomposed accent are two
    /// names, as they are to a JavaScript consumer; names of one length compare with `==`.
    ///
    /// The lengths first for speed, too: most names a lookup passes differ in length (`id`, `type`,
    /// `devices`), a length is read from the string's bits, and `==` on two different names calls into the
    /// standard library's general comparison (1.5% of an event loop's time in `bench pipeline`; figures:
    /// docs/performance.md).
    @inline(__always)
    public static func isSameName(_ name: String, _ other: String) -> Bool {
        name.utf8.count == other.utf8.count && name == other
    }

    /// An object of `members` as they are, for a parser that checked their keys are distinct.
    init(uniqueMembers members: [Member]) { self.members = members }

    /// Appends without checking for an existing key; for builders that know keys are distinct.
    public mutating func appendUnchecked(_ key: String, _ value: JSONValue) {
        members.append(Member(key: key, value: value))
    }

    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }
}

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// Follows a dotted path such as `data.sender.name`; array elements by decimal index.
    public func value(atPath path: some Sequence<Substring>) -> JSONValue? {
        var current = self
        for component in path {
            switch current {
            case .object(let object):
                guard let next = object[String(component)] else { return nil }
                current = next
            case .array(let array):
                guard let index = Int(component), array.indices.contains(index) else { return nil }
                current = array[index]
            default:
                return nil
            }
        }
        return current
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The value as a number, whether stored as an integer or a double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// The value as an integer when it is one exactly (`3` or `3.0`, not `3.5`).
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d):
            guard d.rounded() == d, let i = Int64(exactly: d) else { return nil }
            return i
        default: return nil
        }
    }

    public var kind: JSONKind {
        switch self {
        case .null: return .null
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .array: return .array
        case .object: return .object
        }
    }

    /// The JSON type's name, for error messages ("expected a string, found a number").
    public var typeName: String { kind.typeName }
}

/// The kinds of JSON value: `JSONValue`'s cases, and what a `JSONNode` holds.
public enum JSONKind: Sendable, Hashable {
    case null, bool, int, double, string, array, object

    /// The type's name, for error messages ("expected a string, found a number").
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { JSONObject.Member(key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
}
