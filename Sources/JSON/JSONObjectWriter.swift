// Writes a JSON object's compact bytes member by member, for records written once per notification
// (outcomes): building a JSONValue tree first would cost an allocation per member only to be walked
// and freed again. The output is byte for byte what `JSONValue.compactBytes` gives for the same members.

/// Appends one JSON object to a byte buffer. Call `finish()` once, after the last member.
public struct JSONObjectWriter: ~Copyable {
    public private(set) var bytes: [UInt8]
    private var isFirst = true

    public init(capacity: Int = 512) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Writes `"key":`. Keys are literals of a record's schema, so they are copied as they are.
    ///
    /// - Precondition: `key` needs no JSON escaping (no `"`, `\` or control characters).
    private mutating func key(_ key: StaticString) {
        if !isFirst { bytes.append(UInt8(ascii: ",")) }
        isFirst = false
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { literal in
            assert(
                !literal.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") },
                "JSON object keys written raw must need no escaping")
            bytes.append(contentsOf: literal)
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ key: StaticString, _ value: String?) {
        self.key(key)
        if let value { JSONWriter.writeString(value, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func integer(_ key: StaticString, _ value: Int64?) {
        self.key(key)
        if let value { JSONWriter.writeInteger(value, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func double(_ key: StaticString, _ value: Double) {
        self.key(key)
        JSONWriter.writeDouble(value, into: &bytes)
    }

    /// A UNIX time as an RFC 3339 string with milliseconds (`RFC3339.format`), or null.
    public mutating func timestamp(_ key: StaticString, _ seconds: Double?) {
        quoted(key, seconds) { RFC3339.append($1, to: &$0) }
    }

    /// `"key":"<text>"` with the text written by `write` (it needs no escaping), or `"key":null`.
    private mutating func quoted<Value>(_ key: StaticString, _ value: Value?, _ write: (inout [UInt8], Value) -> Void) {
        self.key(key)
        guard let value else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        write(&bytes, value)
        bytes.append(UInt8(ascii: "\""))
    }

    /// `"key":"<text>"` for a text of exactly `count` bytes that `write` fills in place (it needs no
    /// escaping), or `"key":null`. Not generic, unlike `quoted`: called from another module, a generic
    /// one looked up its type's metadata at run time on every call.
    package mutating func quotedText(
        _ key: StaticString, count: Int?, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Void
    ) {
        self.key(key)
        guard let count else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: count))
        bytes.withUnsafeMutableBufferPointer { write(UnsafeMutableBufferPointer(rebasing: $0[start..<start + count])) }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func value(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        JSONWriter.write(value, into: &bytes)
    }

    /// A nested object, written by `body` into the same buffer.
    public mutating func object(_ key: StaticString, _ body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        nested(body)
    }

    /// An array of objects, each written by `body`.
    public mutating func objects<Element>(
        _ key: StaticString, _ elements: [Element],
        _ body: (inout JSONObjectWriter, Element) -> Void
    ) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for index in elements.indices {
            if index > elements.startIndex { bytes.append(UInt8(ascii: ",")) }
            nested { body(&$0, elements[index]) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `{...}` written by `body` with this writer (same buffer, no copy), its members counted afresh.
    private mutating func nested(_ body: (inout JSONObjectWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        isFirst = true
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        isFirst = false
    }

    /// Closes the object and returns the bytes.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

}
