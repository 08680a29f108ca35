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

    /// Writes `"key":`. Keys are written escaped, as any string.
    private mutating func key(_ key: String) {
        if !isFirst { bytes.append(UInt8(ascii: ",")) }
        isFirst = false
        JSONWriter.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ key: String, _ value: String?) {
        self.key(key)
        if let value { JSONWriter.writeString(value, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func integer(_ key: String, _ value: Int64?) {
        self.key(key)
        if let value { JSONWriter.writeInteger(value, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func double(_ key: String, _ value: Double) {
        self.key(key)
        JSONWriter.writeDouble(value, into: &bytes)
    }

    /// A UNIX time as an RFC 3339 string with milliseconds (`RFC3339.format`), or null.
    public mutating func timestamp(_ key: String, _ seconds: Double?) {
        self.key(key)
        guard let seconds else {
            bytes.append(contentsOf: "null".utf8)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        RFC3339.append(seconds, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func value(_ key: String, _ value: JSONValue) {
        self.key(key)
        JSONWriter.write(value, into: &bytes)
    }

    /// A nested object, written by `body` into the same buffer.
    public mutating func object(_ key: String, _ body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        var nested = JSONObjectWriter(continuing: bytes)
        bytes = []
        body(&nested)
        bytes = nested.finish()
    }

    /// An array of objects, each written by `body`.
    public mutating func objects<Element>(_ key: String, _ elements: [Element],
                                          _ body: (inout JSONObjectWriter, Element) -> Void) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            var nested = JSONObjectWriter(continuing: bytes)
            bytes = []
            body(&nested, element)
            bytes = nested.finish()
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Closes the object and returns the bytes.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private init(continuing bytes: [UInt8]) {
        self.bytes = bytes
        self.bytes.append(UInt8(ascii: "{"))
    }
}
