// The transport's generic request and response: what one HTTP/2 stream carries each way.

/// One header field. HTTP/2 requires lowercase names; the transport sends names as given.
public struct HTTP2Header: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
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
    /// Every regular header field in the order received (pseudo-headers left out).
    public var headers: [HTTP2Header]
    /// The body, at most the pool's `maximumResponseBodyBytes`.
    public var body: [UInt8]
    /// Which of the pool's connections carried the stream (unique in the process), for logs and for
    /// `ConnectionPool.retireConnection(id:)`.
    public var connectionID: UInt64

    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = [], connectionID: UInt64 = 0) {
        self.status = status
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
    }

    /// The first value of a header, compared case-insensitively by name.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered || $0.name.lowercased() == lowered }?.value
    }
}
