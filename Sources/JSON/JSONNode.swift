// Reading a `JSONTape` in place: a node is an entry's index and pointers into the tape, so walking an event
// copies and retains nothing, and a string becomes a `String` only when one is asked for.

/// A value in a `JSONTape`, read where it lies. Valid only inside the `JSONTape.withRoot` call it came from.
public struct JSONNode {
    let entries: UnsafePointer<JSONTape.Entry>
    let bytes: UnsafeBufferPointer<UInt8>
    let index: Int

    @inline(__always) var entry: JSONTape.Entry { entries[index] }

    public var kind: JSONKind {
        switch entry.kind {
        case .null: return .null
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string, .name: return .string
        case .array: return .array
        case .object: return .object
        }
    }

    /// The index of the entry after this value and everything in it.
    @inline(__always) var next: Int {
        let entry = self.entry
        return entry.kind == .array || entry.kind == .object ? Int(entry.end) : index + 1
    }

    /// The JSON type's name, as `JSONValue.typeName` spells it.
    public var typeName: String { kind.typeName }

    public var isNull: Bool { entry.kind == .null }
    public var isObject: Bool { entry.kind == .object }
    public var isArray: Bool { entry.kind == .array }
    public var isString: Bool { entry.kind == .string }

    /// How many members an object has, or elements an array; 0 for anything else.
    public var count: Int {
        let entry = self.entry
        return entry.kind == .array || entry.kind == .object ? Int(entry.count) : 0
    }

    // MARK: - Objects

    /// The value of the member named `key`, for an object that has one.
    public subscript(key: String) -> JSONNode? {
        key.withUTF8Bytes { member(named: $0) }
    }

    /// The value of the member named by the UTF-8 bytes `name`, for an object that has one: `subscript(_:)`
    /// for a caller that holds its names as bytes.
    public func member(named name: UnsafeBufferPointer<UInt8>) -> JSONNode? {
        guard entry.kind == .object else { return nil }
        var position = index + 1
        for _ in 0..<Int(entry.count) {
            let value = JSONNode(entries: entries, bytes: bytes, index: position + 1)
            if JSONNode(entries: entries, bytes: bytes, index: position).isName(name) { return value }
            position = value.next
        }
        return nil
    }

    /// Calls `body` with each member's name and value, in document order, until it returns false.
    public func forEachMember(_ body: (_ name: JSONNode, _ value: JSONNode) throws -> Bool) rethrows {
        guard entry.kind == .object else { return }
        var position = index + 1
        for _ in 0..<Int(entry.count) {
            let value = JSONNode(entries: entries, bytes: bytes, index: position + 1)
            guard try body(JSONNode(entries: entries, bytes: bytes, index: position), value) else { return }
            position = value.next
        }
    }

    /// Whether this string (or member name) is the name `name`, as `JSONObject.isSameName` compares names.
    @inline(__always)
    func isName(_ name: String) -> Bool {
        name.withUTF8Bytes { isName($0) }
    }

    /// `isName(_:)` for a name given as its UTF-8 bytes.
    ///
    /// Inlined into the loops that compare names (a member lookup, the parser's duplicate check): most names a
    /// lookup passes differ in length, and a plain name's length is in its entry, so most comparisons end at
    /// one test. As a call, this was 2.8% of the event loops' CPU in bench pipeline (docs/performance.md).
    @inline(__always)
    func isName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let entry = self.entry
        guard entry.isPlain else { return isEscapedName(name) }
        guard name.count == Int(entry.end &- entry.start) else { return false }
        // Within the document by construction (the parser recorded the name's bounds).
        return JSONNode.isSameName(
            UnsafeBufferPointer(start: bytes.baseAddress.map { $0 + Int(entry.start) }, count: name.count), name)
    }

    /// `isName(_:)` for a name written with escapes, compared as the text they spell.
    @inline(never)
    private func isEscapedName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        withUTF8 { JSONNode.isSameName($0, name) } ?? false
    }

    // MARK: - Arrays

    /// The element at `offset`, for an array that has one.
    public func element(at offset: Int) -> JSONNode? {
        guard entry.kind == .array, offset >= 0, offset < Int(entry.count) else { return nil }
        var position = index + 1
        for _ in 0..<offset { position = JSONNode(entries: entries, bytes: bytes, index: position).next }
        return JSONNode(entries: entries, bytes: bytes, index: position)
    }

    /// The elements of an array, in order; none for anything else.
    public var elements: Elements { Elements(array: self) }

    public struct Elements: Sequence {
        let array: JSONNode?

        /// No elements.
        public static var none: Elements { Elements(array: nil) }

        public struct Iterator: IteratorProtocol {
            let array: JSONNode?
            var position: Int
            var remaining: Int

            public mutating func next() -> JSONNode? {
                guard remaining > 0, let array else { return nil }
                let node = JSONNode(entries: array.entries, bytes: array.bytes, index: position)
                position = node.next
                remaining -= 1
                return node
            }
        }

        public func makeIterator() -> Iterator {
            guard let array, array.entry.kind == .array else { return Iterator(array: nil, position: 0, remaining: 0) }
            return Iterator(array: array, position: array.index + 1, remaining: array.count)
        }
    }

    // MARK: - Scalars

    /// The text of a string; nil for anything else.
    public var stringValue: String? {
        let entry = self.entry
        guard entry.kind == .string || entry.kind == .name else { return nil }
        return JSONNode.text(of: entry, in: bytes)
    }

    /// The text of a string's or name's entry: plain text was checked to be UTF-8 when parsed.
    static func text(of entry: JSONTape.Entry, in bytes: UnsafeBufferPointer<UInt8>) -> String {
        entry.isPlain
            ? String(decoding: UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)]), as: UTF8.self)
            : unescaped(bytes, quoteAt: Int(entry.start) - 1)
    }

    /// Whether this is a string that is `text`, as Swift compares strings (canonically equivalent forms of one
    /// text, such as a precomposed and a decomposed accent, are equal): the bytes first, which settle it
    /// for text that is all ASCII.
    public func isText(_ text: String) -> Bool {
        text.withUTF8Bytes { isText(utf8: $0) }
    }

    /// `isText(_:)` for text given as its UTF-8 bytes.
    public func isText(utf8 text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let sameBytes = withUTF8({ bytes in JSONNode.isSameName(bytes, text) }) else { return false }
        if sameBytes { return true }
        let isASCII = text.allSatisfy { $0 < 0x80 } && withUTF8 { $0.allSatisfy { $0 < 0x80 } } == true
        return !isASCII && stringValue == String(decoding: text, as: UTF8.self)
    }

    /// Whether two UTF-8 texts are one name, as `JSONObject.isSameName` compares names: of one length, and
    /// the same bytes or (not ASCII) canonically equivalent forms of one text, such as combining marks in two
    /// orders. Byte by byte: names and types are short, and `memcmp` is a call that costs more than the loop
    /// for them.
    @inline(__always)
    static func isSameName(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for offset in 0..<a.count where a[offset] != b[offset] {
            guard a.contains(where: { $0 >= 0x80 }) else { return false }
            return String(decoding: a, as: UTF8.self) == String(decoding: b, as: UTF8.self)
        }
        return true
    }

    /// Calls `body` with the UTF-8 text of a string; nil for anything else.
    public func withUTF8<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result? {
        let entry = self.entry
        guard entry.kind == .string || entry.kind == .name else { return nil }
        if entry.isPlain { return try body(UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)])) }
        var text = JSONNode.unescaped(bytes, quoteAt: Int(entry.start) - 1)
        return try text.withUTF8(body)
    }

    /// The text of a string as the bytes JSON writes between its quotes (`JSONWriter.writeStringContents`),
    /// when they are the bytes in the document (it has no escapes); nil otherwise.
    public var plainTextBytes: UnsafeBufferPointer<UInt8>? {
        let entry = self.entry
        guard entry.kind == .string, entry.isPlain else { return nil }
        return UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)])
    }

    public var boolValue: Bool? { entry.kind == .bool ? entry.bits != 0 : nil }

    /// The value as a number, whether an integer or not.
    public var doubleValue: Double? {
        let entry = self.entry
        switch entry.kind {
        case .int: return Double(Int64(bitPattern: entry.bits))
        case .double: return Double(bitPattern: entry.bits)
        default: return nil
        }
    }

    /// The value as an integer when it is one exactly, as `JSONValue.intValue`.
    public var intValue: Int64? {
        let entry = self.entry
        switch entry.kind {
        case .int: return Int64(bitPattern: entry.bits)
        case .double:
            let double = Double(bitPattern: entry.bits)
            guard double.rounded() == double, let integer = Int64(exactly: double) else { return nil }
            return integer
        default: return nil
        }
    }

    /// This value and everything in it as a value tree.
    public var value: JSONValue {
        let entry = self.entry
        switch entry.kind {
        case .null: return .null
        case .bool: return .bool(entry.bits != 0)
        case .int: return .int(Int64(bitPattern: entry.bits))
        case .double: return .double(Double(bitPattern: entry.bits))
        case .string, .name: return .string(stringValue ?? "")
        case .array:
            var elements: [JSONValue] = []
            elements.reserveCapacity(Int(entry.count))
            for element in self.elements { elements.append(element.value) }
            return .array(elements)
        case .object:
            var members: [JSONObject.Member] = []
            members.reserveCapacity(Int(entry.count))
            forEachMember { name, value in
                members.append(JSONObject.Member(key: name.stringValue ?? "", value: value.value))
                return true
            }
            return .object(JSONObject(uniqueMembers: members))
        }
    }

    /// The text of the escaped string whose opening quote is at `quote`, which the parse checked.
    static func unescaped(_ bytes: UnsafeBufferPointer<UInt8>, quoteAt quote: Int) -> String {
        withUnsafeTemporaryAllocation(of: JSONObject.Member.self, capacity: 1) { unused in
            var parser = JSONParser(bytes: bytes, maximumDepth: 1, pending: unused.baseAddress!)
            parser.index = quote
            return (try? parser.parseString()) ?? ""
        }
    }
}
