// The transport's generic request and response: what one HTTP/2 stream carries each way.

import Platform

/// One header field. HTTP/2 requires lowercase names; the transport sends names as given.
public struct HTTP2Header: Sendable, Hashable {
    public var name: String
    public var value: String
    /// Whether HPACK may add the field to the connection's header table. Turn it off for values used
    /// once (a per-request id): indexing them only evicts the fields that repeat, such as a bearer token.
    public var isIndexable: Bool

    public init(_ name: String, _ value: String, isIndexable: Bool = true) {
        self.name = name
        self.value = value
        self.isIndexable = isIndexable
    }
}

/// A request to send on one HTTP/2 stream.
///
/// `scheme` and `authority` default to the pool's endpoint when left empty.
///
/// The pseudo-headers and header fields are kept packed in one byte buffer in the order they are
/// sent, so a request costs one allocation for all of them and the connection hands nghttp2 pointers
/// into it. The properties below read and rewrite that buffer; setting one repacks it (fine for the
/// occasional edit, not for a hot path).
public struct HTTP2Request: Sendable {
    /// `:method`, `:scheme`, `:authority`, `:path`, then the regular fields.
    package var fields: PackedHeaderList
    /// The request body; empty sends HEADERS with END_STREAM and no DATA frame.
    public var body: [UInt8]

    static let methodIndex = 0, schemeIndex = 1, authorityIndex = 2, pathIndex = 3, firstRegularIndex = 4

    public init(
        method: String = "POST", scheme: String = "", authority: String = "", path: String,
        headers: [HTTP2Header] = [], body: [UInt8] = []
    ) {
        let pseudoHeaders = [
            HTTP2Header(":method", method), HTTP2Header(":scheme", scheme), HTTP2Header(":authority", authority),
            HTTP2Header(":path", path),
        ]
        self.init(fields: PackedHeaderList(pseudoHeaders + headers), body: body)
    }

    /// A request from fields already packed in sending order, pseudo-headers first (see `fields`).
    package init(fields: PackedHeaderList, body: [UInt8]) {
        self.fields = fields
        self.body = body
    }

    public var method: String {
        get { fields.value(at: Self.methodIndex) }
        set { fields.replaceValue(at: Self.methodIndex, with: newValue) }
    }

    public var scheme: String {
        get { fields.value(at: Self.schemeIndex) }
        set { fields.replaceValue(at: Self.schemeIndex, with: newValue) }
    }

    public var authority: String {
        get { fields.value(at: Self.authorityIndex) }
        set { fields.replaceValue(at: Self.authorityIndex, with: newValue) }
    }

    public var path: String {
        get { fields.value(at: Self.pathIndex) }
        set { fields.replaceValue(at: Self.pathIndex, with: newValue) }
    }

    /// Whether HPACK may index `:path`; see `HTTP2Header.isIndexable`. Default: true.
    public var isPathIndexable: Bool {
        get { fields.isIndexable(at: Self.pathIndex) }
        set { fields.setIndexable(newValue, at: Self.pathIndex) }
    }

    /// Whether `scheme` and `authority` are set, without making Strings (the pool asks on every send).
    var hasSchemeAndAuthority: Bool {
        !fields.valueIsEmpty(at: Self.schemeIndex) && !fields.valueIsEmpty(at: Self.authorityIndex)
    }

    /// Regular (non-pseudo) header fields, lowercase names, in the order they are sent.
    public var headers: [HTTP2Header] {
        get { Array(fields.headers.dropFirst(Self.firstRegularIndex)) }
        set { fields = PackedHeaderList(fields.headers.prefix(Self.firstRegularIndex) + newValue) }
    }
}

/// Header fields packed in one byte buffer, in order: per field a flags byte (bit 0: HPACK may index
/// it), the name's and the value's lengths (4 bytes each, little endian), then the name (lowercase) and
/// value bytes.
package struct PackedHeaderList: Sendable {
    private(set) var storage: [UInt8]
    private(set) var count: Int

    private static let indexableFlag: UInt8 = 1
    private static let fieldHeaderSize = 9

    /// No fields.
    init() {
        storage = []
        count = 0
    }

    /// `headers` packed in order, each with its HPACK flag.
    init(_ headers: [HTTP2Header]) {
        let byteCount = headers.reduce(0) {
            $0 + Self.size(nameCount: $1.name.utf8.count, valueCount: $1.value.utf8.count)
        }
        self.init(byteCount: byteCount) { writer in
            for header in headers {
                writer.append(name: header.name, value: header.value, indexable: header.isIndexable)
            }
        }
    }

    /// One field's place in `storage`.
    struct Field {
        var nameStart: Int
        var nameCount: Int
        var valueStart: Int
        var valueCount: Int
        var isIndexable: Bool
    }

    /// The bytes one field takes.
    package static func size(nameCount: Int, valueCount: Int) -> Int { fieldHeaderSize + nameCount + valueCount }

    /// A list of exactly `byteCount` bytes of fields, written by `fill`, in one array of exactly that size (a
    /// client that sizes its requests up front writes them this way).
    ///
    /// The fields are written into a temporary buffer and copied into the list's array: filled in place
    /// through `Array(unsafeUninitializedCapacity:)`, every request's list cost a run-time metadata lookup
    /// (that initializer is not specialized into this module), more than the copy of a few hundred bytes
    /// (figures: docs/performance.md).
    package init(byteCount: Int, _ fill: (inout Writer) -> Void) {
        (storage, count) = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: byteCount) { buffer in
            var writer = Writer(buffer: buffer)
            fill(&writer)
            precondition(writer.offset == byteCount, "packed \(writer.offset) of \(byteCount) header bytes")
            return (Array(UnsafeBufferPointer(rebasing: buffer[..<writer.offset])), writer.count)
        }
    }

    /// Writes fields into a buffer of known size; see `init(byteCount:_:)`.
    package struct Writer: ~Copyable {
        fileprivate let buffer: UnsafeMutableBufferPointer<UInt8>
        fileprivate var offset = 0
        fileprivate var count = 0

        fileprivate init(buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

        package mutating func append(name: StaticString, value: String, indexable: Bool) {
            value.withUTF8Bytes { bytes in
                append(name: name, valueCount: bytes.count, indexable: indexable) {
                    _ = $0.initialize(fromContentsOf: bytes)
                }
            }
        }

        package mutating func append(name: String, value: String, indexable: Bool) {
            name.withUTF8Bytes { nameBytes in
                value.withUTF8Bytes { bytes in
                    append(nameBytes: nameBytes, valueCount: bytes.count, indexable: indexable) {
                        _ = $0.initialize(fromContentsOf: bytes)
                    }
                }
            }
        }

        /// A field whose value `write` renders in place: exactly `valueCount` bytes.
        package mutating func append(
            name: StaticString, valueCount: Int, indexable: Bool, write: (UnsafeMutableBufferPointer<UInt8>) -> Void
        ) {
            append(
                nameBytes: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                valueCount: valueCount, indexable: indexable, write: write)
        }

        private mutating func append(
            nameBytes: UnsafeBufferPointer<UInt8>, valueCount: Int, indexable: Bool,
            write: (UnsafeMutableBufferPointer<UInt8>) -> Void
        ) {
            let nameCount = nameBytes.count
            precondition(offset + PackedHeaderList.size(nameCount: nameCount, valueCount: valueCount) <= buffer.count)
            buffer[offset] = indexable ? PackedHeaderList.indexableFlag : 0
            store(nameCount, at: offset + 1)
            store(valueCount, at: offset + 5)
            let nameStart = offset + PackedHeaderList.fieldHeaderSize
            // Names are stored lowercase, as HTTP/2 sends them: the connection hands them to nghttp2 without
            // a copy, and nghttp2 lowercases only the names it copies.
            for index in 0..<nameCount { buffer[nameStart + index] = asciiLowercased(nameBytes[index]) }
            let valueStart = nameStart + nameCount
            write(UnsafeMutableBufferPointer(rebasing: buffer[valueStart..<valueStart + valueCount]))
            offset = valueStart + valueCount
            count += 1
        }

        private func store(_ length: Int, at position: Int) {
            let value = UInt32(truncatingIfNeeded: length)
            buffer[position] = UInt8(truncatingIfNeeded: value)
            buffer[position + 1] = UInt8(truncatingIfNeeded: value >> 8)
            buffer[position + 2] = UInt8(truncatingIfNeeded: value >> 16)
            buffer[position + 3] = UInt8(truncatingIfNeeded: value >> 24)
        }
    }

    /// Calls `body` with the packed bytes; walk them with `forEachField(in:_:)`.
    func withUnsafeBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        storage.withUnsafeBufferPointer(body)
    }

    /// Calls `visit` with every field's place in `bytes` (a packed list's storage), in order.
    static func forEachField(in bytes: UnsafeBufferPointer<UInt8>, _ visit: (Field) -> Void) {
        var offset = 0
        while offset < bytes.count {
            let field = field(in: bytes, at: offset)
            visit(field)
            offset = field.valueStart + field.valueCount
        }
    }

    private static func field(in bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Field {
        let nameCount = length(bytes, at: offset + 1)
        let valueCount = length(bytes, at: offset + 5)
        let nameStart = offset + fieldHeaderSize
        return Field(
            nameStart: nameStart, nameCount: nameCount, valueStart: nameStart + nameCount,
            valueCount: valueCount, isIndexable: bytes[offset] & indexableFlag != 0)
    }

    private static func length(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Int {
        Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
    }

    /// The offset of field `index` in `storage`.
    private func offset(of index: Int) -> Int {
        precondition(index >= 0 && index < count, "header field \(index) of \(count)")
        return storage.withUnsafeBufferPointer { bytes in
            var offset = 0
            for _ in 0..<index {
                let field = Self.field(in: bytes, at: offset)
                offset = field.valueStart + field.valueCount
            }
            return offset
        }
    }

    private func fieldAt(_ index: Int) -> Field {
        let offset = offset(of: index)
        return storage.withUnsafeBufferPointer { Self.field(in: $0, at: offset) }
    }

    func value(at index: Int) -> String {
        let field = fieldAt(index)
        return String(decoding: storage[field.valueStart..<field.valueStart + field.valueCount], as: UTF8.self)
    }

    func isIndexable(at index: Int) -> Bool { fieldAt(index).isIndexable }

    func valueIsEmpty(at index: Int) -> Bool { fieldAt(index).valueCount == 0 }

    mutating func setIndexable(_ indexable: Bool, at index: Int) {
        let offset = offset(of: index)
        storage[offset] = indexable ? Self.indexableFlag : 0
    }

    /// Rewrites field `index` with a new value, keeping its name and flag.
    mutating func replaceValue(at index: Int, with value: String) {
        var all = headers
        all[index].value = value
        self = PackedHeaderList(all)
    }

    /// Every field, in order, as values.
    var headers: [HTTP2Header] {
        withUnsafeBytes { bytes in
            var result: [HTTP2Header] = []
            result.reserveCapacity(count)
            Self.forEachField(in: bytes) { field in
                result.append(
                    HTTP2Header(
                        String(decoding: bytes[field.nameStart..<field.nameStart + field.nameCount], as: UTF8.self),
                        String(decoding: bytes[field.valueStart..<field.valueStart + field.valueCount], as: UTF8.self),
                        isIndexable: field.isIndexable))
            }
            return result
        }
    }
}

/// A complete response: status, header fields and the (capped) body.
public struct HTTP2Response: Sendable {
    /// The `:status` pseudo-header, e.g. 200.
    public var status: Int
    /// Every regular header field in the order received (pseudo-headers left out), stored compactly.
    public var headerFields: HTTP2HeaderFields
    /// The body, at most the pool's `maximumResponseBodyBytes`.
    public var body: [UInt8]
    /// Which of the pool's connections carried the stream (unique in the process), for logs and for
    /// `ConnectionPool.retireConnection(id:)`.
    public var connectionID: UInt64

    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = [], connectionID: UInt64 = 0) {
        self.init(status: status, headerFields: HTTP2HeaderFields(headers), body: body, connectionID: connectionID)
    }

    public init(status: Int, headerFields: HTTP2HeaderFields, body: [UInt8], connectionID: UInt64) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.connectionID = connectionID
    }

    /// The header fields as values (allocates; `header(_:)` does not).
    public var headers: [HTTP2Header] { Array(headerFields) }

    /// The first value of a header, its name compared case-insensitively.
    public func header(_ name: String) -> String? { headerFields.first(named: name) }
}

/// Header fields in one byte buffer (length-prefixed name/value pairs): a response's headers cost one
/// allocation instead of two strings per field. Iterating yields `HTTP2Header`s.
public struct HTTP2HeaderFields: Sendable, Hashable, Sequence {
    private var storage: [UInt8] = []
    public private(set) var count = 0

    public init() {}

    public init(_ headers: [HTTP2Header]) {
        for header in headers {
            append(name: Array(header.name.utf8), value: Array(header.value.utf8))
        }
    }

    public var isEmpty: Bool { count == 0 }

    package mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        if storage.isEmpty { storage.reserveCapacity(192) }
        Self.appendLength(name.count, to: &storage)
        storage.append(contentsOf: name)
        Self.appendLength(value.count, to: &storage)
        storage.append(contentsOf: value)
        count += 1
    }

    /// The first value whose name equals `name`, ignoring ASCII case.
    public func first(named name: String) -> String? {
        withFirstValue(named: name) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes of the first value whose name equals `name` (ignoring ASCII case),
    /// without making a String; nil when there is no such header.
    public func withFirstValue<R>(named name: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        var name = name
        return name.withUTF8 { wanted in
            storage.withUnsafeBufferPointer { bytes -> R? in
                var offset = 0
                while offset < bytes.count {
                    let nameLength = Self.length(bytes, at: offset)
                    let nameStart = offset + 4
                    let valueLength = Self.length(bytes, at: nameStart + nameLength)
                    let valueStart = nameStart + nameLength + 4
                    if nameLength == wanted.count, Self.equalIgnoringCase(bytes, nameStart, wanted) {
                        return body(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueStart + valueLength]))
                    }
                    offset = valueStart + valueLength
                }
                return nil
            }
        }
    }

    public func makeIterator() -> Iterator { Iterator(storage: storage) }

    public struct Iterator: IteratorProtocol {
        fileprivate let storage: [UInt8]
        fileprivate var offset = 0

        public mutating func next() -> HTTP2Header? {
            guard offset < storage.count else { return nil }
            let nameLength = HTTP2HeaderFields.length(storage, at: offset)
            let nameStart = offset + 4
            let valueLength = HTTP2HeaderFields.length(storage, at: nameStart + nameLength)
            let valueStart = nameStart + nameLength + 4
            offset = valueStart + valueLength
            return HTTP2Header(
                String(decoding: storage[nameStart..<nameStart + nameLength], as: UTF8.self),
                String(decoding: storage[valueStart..<valueStart + valueLength], as: UTF8.self))
        }
    }

    private static func appendLength(_ length: Int, to storage: inout [UInt8]) {
        // Four single appends: cheaper than appending a raw buffer of four bytes.
        let value = UInt32(truncatingIfNeeded: length)
        storage.append(UInt8(truncatingIfNeeded: value))
        storage.append(UInt8(truncatingIfNeeded: value >> 8))
        storage.append(UInt8(truncatingIfNeeded: value >> 16))
        storage.append(UInt8(truncatingIfNeeded: value >> 24))
    }

    fileprivate static func length<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at offset: Int) -> Int
    where Bytes.Index == Int {
        let b0 = Int(bytes[offset])
        let b1 = Int(bytes[offset + 1]) << 8
        let b2 = Int(bytes[offset + 2]) << 16
        let b3 = Int(bytes[offset + 3]) << 24
        return b0 | b1 | b2 | b3
    }

    private static func equalIgnoringCase(
        _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int,
        _ wanted: UnsafeBufferPointer<UInt8>
    )
        -> Bool
    {
        for index in 0..<wanted.count where asciiLowercased(bytes[start + index]) != asciiLowercased(wanted[index]) {
            return false
        }
        return true
    }
}

/// `byte` with an ASCII capital letter made lowercase; every other byte as it is.
@inline(__always)
private func asciiLowercased(_ byte: UInt8) -> UInt8 {
    byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
}
