// A JSON document kept flat: its bytes, and one entry per value in document order that says where the value
// lies in them. Events are parsed this way because the worker reads a few members of each and copies fewer:
// a `JSONValue` tree costs an allocation per object, array and long string, and every walk through it retains
// and releases what it passes (a quarter of the event loops' allocations and a third of their retains in
// `bench pipeline`; figures: docs/performance.md). A tape is two allocations, and `JSONNode`, its reader,
// is plain indices and pointers.
//
// The parse is `JSONParser`'s, as strict and with the same errors: the same code reads strings, numbers and
// literals, and the structure is walked the same way.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed JSON document as a flat list of entries over its bytes. Read it with `withRoot`.
public struct JSONTape: Sendable {
    /// The document's UTF-8 bytes, as given.
    public let bytes: [UInt8]
    let entries: [Entry]

    /// One value: its kind; for a string (or a member name) the range of its text between the quotes;
    /// for an array or object its count and the index of the entry after its last descendant; for a
    /// number or boolean its value in `bits`.
    struct Entry: Sendable {
        var kind: Kind
        /// A string or name without escapes: its bytes are its UTF-8 text.
        var isPlain: Bool
        var count: UInt32
        var start: Int32
        var end: Int32
        var bits: UInt64

        enum Kind: UInt8, Sendable {
            case null, bool, int, double, string, array, object, name
        }
    }

    /// Parses one JSON document, as `JSONValue(parsing:options:)` would with `allowsDuplicateKeys` false: the
    /// same documents are accepted and the same errors thrown. A tape keeps every member it reads, so a name
    /// given twice in one object is always refused (a lookup could not say which one the producer meant).
    public init(parsing bytes: [UInt8], maximumDepth: Int = 128) throws(JSONParseError) {
        guard bytes.count < Int(Int32.max) else {
            throw JSONParseError(message: "a document of 2 GiB or more", offset: 0, line: 1, column: 1)
        }
        var entries: [Entry] = []
        // About one value per eight bytes in events; a guess too small costs a copy or two.
        entries.reserveCapacity(bytes.count / 8 + 4)
        let failure: JSONParseError? = bytes.withUnsafeBufferPointer { buffer in
            // The tree's pending members are not used here; the parser wants somewhere to point.
            withUnsafeTemporaryAllocation(of: JSONObject.Member.self, capacity: 1) { unused in
                var parser = JSONParser(
                    bytes: buffer, maximumDepth: maximumDepth, allowsDuplicateKeys: false,
                    pending: unused.baseAddress!)
                return parser.parseTapeDocument(into: &entries)
            }
        }
        if let failure { throw failure }
        self.bytes = bytes
        self.entries = entries
    }

    /// The tape of `value` (its compact encoding, parsed).
    public init(_ value: JSONValue) {
        // Cannot fail: the writer writes what the parser accepts, with no name twice in an object.
        try! self.init(parsing: value.compactBytes)
    }

    /// The tape of `null`.
    public static let null = JSONTape(.null)

    /// Calls `body` with the document's top-level value. The node and every node read from it are valid
    /// only during the call: they point into the tape.
    public func withRoot<Result>(_ body: (JSONNode) throws -> Result) rethrows -> Result {
        try entries.withUnsafeBufferPointer { entries in
            try bytes.withUnsafeBufferPointer { bytes in
                try body(JSONNode(entries: entries.baseAddress!, bytes: bytes, index: 0))
            }
        }
    }

    /// The document as a value tree.
    public var value: JSONValue { withRoot { $0.value } }
}

/// A value in a `JSONTape`, read where it lies. Valid only inside the `JSONTape.withRoot` call it came from.
public struct JSONNode {
    let entries: UnsafePointer<JSONTape.Entry>
    let bytes: UnsafeBufferPointer<UInt8>
    let index: Int

    @inline(__always) var entry: JSONTape.Entry { entries[index] }

    /// The kinds of JSON value, as `JSONValue`'s cases.
    public enum Kind: Sendable {
        case null, bool, int, double, string, array, object
    }

    public var kind: Kind {
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
    public var typeName: String {
        switch kind {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

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
        guard entry.kind == .object else { return nil }
        var key = key
        return key.withUTF8 { name in
            var position = index + 1
            for _ in 0..<Int(entry.count) {
                let value = JSONNode(entries: entries, bytes: bytes, index: position + 1)
                if JSONNode(entries: entries, bytes: bytes, index: position).isName(name) { return value }
                position = value.next
            }
            return nil
        }
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

    /// Whether this string (or member name) is `name`, given as UTF-8: RFC 8259 compares names code unit by
    /// code unit.
    func isName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let entry = self.entry
        guard entry.isPlain else { return Array(stringValue?.utf8 ?? "".utf8).elementsEqual(name) }
        let length = Int(entry.end - entry.start)
        guard length == name.count else { return false }
        guard length > 0 else { return true }
        return memcmp(bytes.baseAddress! + Int(entry.start), name.baseAddress!, length) == 0
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
        let array: JSONNode

        public struct Iterator: IteratorProtocol {
            let array: JSONNode
            var position: Int
            var remaining: Int

            public mutating func next() -> JSONNode? {
                guard remaining > 0 else { return nil }
                let node = JSONNode(entries: array.entries, bytes: array.bytes, index: position)
                position = node.next
                remaining -= 1
                return node
            }
        }

        public func makeIterator() -> Iterator {
            Iterator(array: array, position: array.index + 1, remaining: array.entry.kind == .array ? array.count : 0)
        }
    }

    // MARK: - Scalars

    /// The text of a string; nil for anything else.
    public var stringValue: String? {
        let entry = self.entry
        guard entry.kind == .string || entry.kind == .name else { return nil }
        let text = UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)])
        // Plain text was checked to be UTF-8 when parsed.
        if entry.isPlain { return String(decoding: text, as: UTF8.self) }
        return JSONNode.unescaped(bytes, quoteAt: Int(entry.start) - 1)
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

// MARK: - Parsing

extension JSONParser {
    /// Parses the whole document into `entries`; the error when it is not one JSON document.
    mutating func parseTapeDocument(into entries: inout [JSONTape.Entry]) -> JSONParseError? {
        do {
            skipWhitespace()
            if index == bytes.count { throw error("the document is empty") }
            try parseTapeValue(into: &entries)
            skipWhitespace()
            if index != bytes.count { throw error("unexpected \(describeByte()) after the end of the document") }
            return nil
        } catch let error as JSONParseError {
            return error
        } catch {
            return self.error("\(error)")
        }
    }

    mutating func parseTapeValue(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try parseTapeObject(into: &entries)
        case UInt8(ascii: "["): try parseTapeArray(into: &entries)
        case UInt8(ascii: "\""): entries.append(try scanTapeString(kind: .string))
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            entries.append(JSONTape.Entry(kind: .bool, isPlain: true, count: 0, start: 0, end: 0, bits: 1))
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            entries.append(JSONTape.Entry(kind: .bool, isPlain: true, count: 0, start: 0, end: 0, bits: 0))
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            entries.append(JSONTape.Entry(kind: .null, isPlain: true, count: 0, start: 0, end: 0, bits: 0))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try parseNumber() {
            case .int(let integer):
                entries.append(
                    JSONTape.Entry(
                        kind: .int, isPlain: true, count: 0, start: 0, end: 0, bits: UInt64(bitPattern: integer)))
            case .double(let double):
                entries.append(
                    JSONTape.Entry(kind: .double, isPlain: true, count: 0, start: 0, end: 0, bits: double.bitPattern))
            default: break
            }
        default: throw error("unexpected \(describeByte()), expected a value")
        }
    }

    /// A string's entry: its text's range, plain when it has no escapes. Plain ASCII is scanned here without
    /// making a string; anything else is read by `parseString()`, which checks escapes and UTF-8.
    mutating func scanTapeString(kind: JSONTape.Entry.Kind) throws(JSONParseError) -> JSONTape.Entry {
        let quote = index
        index += 1
        let contentStart = index
        while index < bytes.count {
            if bytes.count - index >= 8 {
                let word = ByteScan.word(bytes, at: index)
                let plain = ByteScan.firstQuoteBackslashOrControl(word)
                if ByteScan.hasNonASCII(word, first: plain) { break }
                index += plain
                if plain == 8 { continue }
            }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let end = index
                index += 1
                return JSONTape.Entry(
                    kind: kind, isPlain: true, count: 0, start: Int32(contentStart), end: Int32(end), bits: 0)
            }
            if byte == UInt8(ascii: "\\") || byte >= 0x80 || byte < 0x20 { break }
            index += 1
        }
        // Escapes, non-ASCII text or an error: the tree's reading checks it (and says what is wrong).
        index = quote
        _ = try parseString()
        var isPlain = true
        for offset in contentStart..<(index - 1) where bytes[offset] == UInt8(ascii: "\\") {
            isPlain = false
            break
        }
        return JSONTape.Entry(
            kind: kind, isPlain: isPlain, count: 0, start: Int32(contentStart), end: Int32(index - 1), bits: 0)
    }

    mutating func parseTapeObject(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        try enter()
        let object = entries.count
        entries.append(JSONTape.Entry(kind: .object, isPlain: true, count: 0, start: 0, end: 0, bits: 0))
        index += 1
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            entries[object].end = Int32(entries.count)
            return
        }
        var count: UInt32 = 0
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("unexpected \(describeByte()), expected a member name in double quotes")
            }
            let keyStart = index
            let name = entries.count
            entries.append(try scanTapeString(kind: .name))
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                let key = tapeText(entries[name])
                throw error("unexpected \(describeByte()), expected ':' after member name \"\(key)\"")
            }
            index += 1
            skipWhitespace()
            do { try parseTapeValue(into: &entries) } catch { throw error.inside(member: tapeText(entries[name])) }
            if count > 0, namesBefore(name, in: entries, from: object + 1, count: count) {
                let key = tapeText(entries[name])
                var duplicate = error("duplicate member name \"\(key.prefix(100))\"", at: keyStart)
                duplicate.duplicateMemberName = key
                throw duplicate
            }
            count += 1
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                entries[object].count = count
                entries[object].end = Int32(entries.count)
                return
            }
            throw error("unexpected \(describeByte()), expected ',' or '}' in an object")
        }
    }

    /// Whether one of the `count` members from entry `first` has the name at entry `name`.
    private func namesBefore(_ name: Int, in entries: [JSONTape.Entry], from first: Int, count: UInt32) -> Bool {
        entries.withUnsafeBufferPointer { buffer in
            let node = JSONNode(entries: buffer.baseAddress!, bytes: bytes, index: name)
            return node.withUTF8 { text in
                var position = first
                for _ in 0..<count {
                    let value = JSONNode(entries: buffer.baseAddress!, bytes: bytes, index: position + 1)
                    if JSONNode(entries: buffer.baseAddress!, bytes: bytes, index: position).isName(text) {
                        return true
                    }
                    position = value.next
                }
                return false
            } ?? false
        }
    }

    /// The text of a name's entry, for messages.
    private func tapeText(_ entry: JSONTape.Entry) -> String {
        entry.isPlain
            ? String(decoding: UnsafeBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)]), as: UTF8.self)
            : JSONNode.unescaped(bytes, quoteAt: Int(entry.start) - 1)
    }

    mutating func parseTapeArray(into entries: inout [JSONTape.Entry]) throws(JSONParseError) {
        try enter()
        let array = entries.count
        entries.append(JSONTape.Entry(kind: .array, isPlain: true, count: 0, start: 0, end: 0, bits: 0))
        index += 1
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            entries[array].end = Int32(entries.count)
            return
        }
        var count: UInt32 = 0
        while true {
            skipWhitespace()
            do { try parseTapeValue(into: &entries) } catch { throw error.inside(element: Int(count)) }
            count += 1
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                entries[array].count = count
                entries[array].end = Int32(entries.count)
                return
            }
            throw error("unexpected \(describeByte()), expected ',' or ']' in an array")
        }
    }
}
