// Writes a JSON object's compact bytes member by member, for records written once per notification
// (outcomes): building a JSONValue tree first would cost an allocation per member only to be walked
// and freed again. The output is byte for byte what `JSONValue.compactBytes` gives for the same members.
//
// The bytes go into a buffer this writer owns (or scratch room its caller lends, such as stack room),
// each member's text copied in with one capacity check, and become an array of exactly their size at
// `finish()`. Appending to an `[UInt8]` byte by byte (a uniqueness and a capacity check per quote, comma
// and colon) cost more than the text itself, and the array kept its whole reserved capacity for as long
// as the record waited for Kafka.

/// Appends one JSON object to a byte buffer. Call `finish()` once, after the last member.
public struct JSONObjectWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    private var isFirst = true
    /// Whether `base` is this writer's own allocation, freed with it; false while it writes into the
    /// caller's scratch room.
    private var ownsBase = true

    public init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
        append(UInt8(ascii: "{"))
    }

    /// A writer that starts in `scratch`, memory its caller owns (room from `withUnsafeTemporaryAllocation`,
    /// on the stack), and moves to memory of its own only if the object outgrows it: a record written once
    /// per notification then costs one allocation, the array `finish()` returns.
    ///
    /// - Important: take the bytes with `finish()` before `scratch` goes away.
    public init(scratch: UnsafeMutableBufferPointer<UInt8>) {
        if let start = scratch.baseAddress, scratch.count >= 16 {
            base = start
            capacity = scratch.count
            ownsBase = false
        } else {
            capacity = 16
            base = .allocate(capacity: capacity)
        }
        append(UInt8(ascii: "{"))
    }

    deinit { if ownsBase { base.deallocate() } }

    /// The bytes written so far.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Makes room for `extra` more bytes.
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(toFit: count + extra) }
    }

    private mutating func grow(toFit needed: Int) {
        let newCapacity = max(capacity * 2, needed)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        if ownsBase { base.deallocate() }
        base = newBase
        capacity = newCapacity
        ownsBase = true
    }

    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        if let source = bytes.baseAddress { Self.copy(source, bytes.count, to: base + count) }
        count += bytes.count
    }

    /// Copies `byteCount` bytes. A record's texts are short (keys, ids, a token, numbers), and a call into
    /// libc's memmove for each took 1.2% of an event loop's samples in `bench pipeline` (docs/performance.md):
    /// up to 16 bytes go inline as two overlapping loads and stores, which read and write only the bytes
    /// named.
    @inline(__always)
    static func copy(_ source: UnsafeRawPointer, _ byteCount: Int, to target: UnsafeMutableRawPointer) {
        if byteCount > 16 {
            target.copyMemory(from: source, byteCount: byteCount)
        } else if byteCount >= 8 {
            let head = source.loadUnaligned(as: UInt64.self)
            let tail = source.loadUnaligned(fromByteOffset: byteCount - 8, as: UInt64.self)
            target.storeBytes(of: head, as: UInt64.self)
            target.storeBytes(of: tail, toByteOffset: byteCount - 8, as: UInt64.self)
        } else if byteCount >= 4 {
            let head = source.loadUnaligned(as: UInt32.self)
            let tail = source.loadUnaligned(fromByteOffset: byteCount - 4, as: UInt32.self)
            target.storeBytes(of: head, as: UInt32.self)
            target.storeBytes(of: tail, toByteOffset: byteCount - 4, as: UInt32.self)
        } else if byteCount >= 2 {
            let head = source.loadUnaligned(as: UInt16.self)
            let tail = source.loadUnaligned(fromByteOffset: byteCount - 2, as: UInt16.self)
            target.storeBytes(of: head, as: UInt16.self)
            target.storeBytes(of: tail, toByteOffset: byteCount - 2, as: UInt16.self)
        } else if byteCount == 1 {
            target.storeBytes(of: source.load(as: UInt8.self), as: UInt8.self)
        }
    }

    /// `"<text>"` for a text of exactly `textCount` bytes that `fill` writes at the pointer it is given
    /// (it needs no escaping).
    @inline(__always)
    private mutating func appendQuoted(_ textCount: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Void) {
        reserve(textCount + 2)
        base[count] = UInt8(ascii: "\"")
        fill(base + count + 1)
        count += textCount + 1
        base[count] = UInt8(ascii: "\"")
        count += 1
    }

    private mutating func appendNull() {
        let literal: StaticString = "null"
        literal.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
    }

    /// Writes `,"key":` (no comma before the first member). Keys are literals of a record's schema, so
    /// they are copied as they are.
    ///
    /// - Precondition: `key` needs no JSON escaping (no `"`, `\` or control characters).
    private mutating func key(_ key: StaticString) {
        key.withUTF8Buffer { literal in
            assert(!JSONWriter.needsEscaping(literal), "JSON object keys written raw must need no escaping")
            reserve(literal.count + 4)
            if !isFirst {
                base[count] = UInt8(ascii: ",")
                count += 1
            }
            base[count] = UInt8(ascii: "\"")
            Self.copy(literal.baseAddress!, literal.count, to: base + count + 1)
            count += literal.count + 1
            base[count] = UInt8(ascii: "\"")
            base[count + 1] = UInt8(ascii: ":")
            count += 2
        }
        isFirst = false
    }

    public mutating func string(_ key: StaticString, _ value: String?) {
        self.key(key)
        guard let value else { return appendNull() }
        value.withUTF8Bytes { text in
            guard !JSONWriter.needsEscaping(text) else {
                // Rare in records (texts are ids, tokens, topics and reasons): the general writer escapes.
                var escaped: [UInt8] = []
                JSONWriter.writeString(value, into: &escaped)
                escaped.withUnsafeBytes { append($0) }
                return
            }
            appendQuoted(text.count) { target in
                if let source = text.baseAddress { Self.copy(source, text.count, to: target) }
            }
        }
    }

    public mutating func integer(_ key: StaticString, _ value: Int64?) {
        self.key(key)
        guard let value else { return appendNull() }
        JSONWriter.withIntegerText(value) { append($0) }
    }

    public mutating func double(_ key: StaticString, _ value: Double) {
        self.key(key)
        JSONWriter.withDoubleText(value) { append($0) }
    }

    public mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        let literal: StaticString = value ? "true" : "false"
        literal.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
    }

    /// A UNIX time as an RFC 3339 string with milliseconds (`RFC3339.format`), or null.
    public mutating func timestamp(_ key: StaticString, _ seconds: Double?) {
        self.key(key)
        guard let seconds else { return appendNull() }
        RFC3339.withText(seconds) { text in
            appendQuoted(text.count) { Self.copy(text.baseAddress!, text.count, to: $0) }
        }
    }

    /// `"key":"<text>"` for a text of exactly `count` bytes that `write` fills in place (it needs no
    /// escaping), or `"key":null`. Not generic: called from another module, a generic one looked up
    /// its type's metadata at run time on every call.
    package mutating func quotedText(
        _ key: StaticString, count textCount: Int?, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Void
    ) {
        self.key(key)
        guard let textCount else { return appendNull() }
        appendQuoted(textCount) { write(UnsafeMutableBufferPointer(start: $0, count: textCount)) }
    }

    public mutating func value(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        var text: [UInt8] = []
        JSONWriter.write(value, into: &text)
        text.withUnsafeBytes { append($0) }
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
        append(UInt8(ascii: "["))
        for index in elements.indices {
            if index > elements.startIndex { append(UInt8(ascii: ",")) }
            nested { body(&$0, elements[index]) }
        }
        append(UInt8(ascii: "]"))
    }

    /// `{...}` written by `body` with this writer (same buffer, no copy), its members counted afresh.
    private mutating func nested(_ body: (inout JSONObjectWriter) -> Void) {
        append(UInt8(ascii: "{"))
        isFirst = true
        body(&self)
        append(UInt8(ascii: "}"))
        isFirst = false
    }

    /// Closes the object and returns the bytes, in an array of exactly their size.
    public consuming func finish() -> [UInt8] {
        append(UInt8(ascii: "}"))
        return bytes
    }
}
