// The transport's generic request and response: what one HTTP/2 stream carries each way.

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
public struct HTTP2Request: Sendable {
    public var method: String
    public var scheme: String
    public var authority: String
    public var path: String
    /// Regular (non-pseudo) header fields, lowercase names, in the order they are sent.
    public var headers: [HTTP2Header]
    /// The request body; empty sends HEADERS with END_STREAM and no DATA frame.
    public var body: [UInt8]
    /// Whether HPACK may index `:path`; see `HTTP2Header.isIndexable`. Default: true.
    public var isPathIndexable: Bool = true

    public init(
        method: String = "POST", scheme: String = "", authority: String = "", path: String,
        headers: [HTTP2Header] = [], body: [UInt8] = []
    ) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.body = body
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

    mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
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
        return name.withUTF8 { wanted in storage.withUnsafeBufferPointer { bytes -> R? in
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
        } }
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
            return HTTP2Header(String(decoding: storage[nameStart..<nameStart + nameLength], as: UTF8.self),
                String(decoding: storage[valueStart..<valueStart + valueLength], as: UTF8.self))
        }
    }

    private static func appendLength(_ length: Int, to storage: inout [UInt8]) {
        let value = UInt32(truncatingIfNeeded: length).littleEndian
        withUnsafeBytes(of: value) { storage.append(contentsOf: $0) }
    }

    fileprivate static func length<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at offset: Int) -> Int
        where Bytes.Index == Int
    {
        let b0 = Int(bytes[offset])
        let b1 = Int(bytes[offset + 1]) << 8
        let b2 = Int(bytes[offset + 2]) << 16
        let b3 = Int(bytes[offset + 3]) << 24
        return b0 | b1 | b2 | b3
    }

    private static func equalIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int,
                                          _ wanted: UnsafeBufferPointer<UInt8>)
        -> Bool
    {
        for index in 0..<wanted.count {
            var stored = bytes[start + index]
            var other = wanted[index]
            if stored >= 0x41 && stored <= 0x5A { stored |= 0x20 }
            if other >= 0x41 && other <= 0x5A { other |= 0x20 }
            if stored != other { return false }
        }
        return true
    }
}
