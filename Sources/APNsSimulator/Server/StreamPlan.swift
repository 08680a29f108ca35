// The hand-off between the HTTP/2 connection (bytes, frames, timers) and the simulator's logic
// (faults, validation, device state, recording): one complete request in, one plan for its stream out.

import APNs

/// One request as it arrived on a stream: pseudo-headers, regular headers in order, and the body.
struct IncomingRequest: Sendable {
    var method: String?
    var path: String?
    /// Regular (non-pseudo) headers in arrival order, names lowercase as HTTP/2 requires.
    var headers: [APNsHeaderField] = IncomingRequest.emptyHeaders()
    /// True when an `authorization` header arrived (records leave it out).
    var hasAuthorization = false
    /// The first regular header name that arrived more than once.
    var duplicateHeaderName: String?
    /// The body, up to `bodyCapacity` bytes.
    var body: [UInt8] = []
    /// The body's full length, even beyond what was kept.
    var bodyLength = 0

    /// The most body bytes a stream keeps: enough to tell the largest allowed payload (5120, voip)
    /// from one byte more, so an oversized body cannot grow memory.
    static let bodyCapacity = 5121

    /// Room for an APNs request's headers (about nine), so adding them does not grow the array three times.
    static func emptyHeaders() -> [APNsHeaderField] {
        var headers: [APNsHeaderField] = []
        headers.reserveCapacity(12)
        return headers
    }

    init(method: String? = nil, path: String? = nil, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.body = body
        self.bodyLength = body.count
        for (name, value) in headers { addHeader(name: name, value: value) }
    }

    mutating func addHeader(name: String, value: String) {
        if duplicateHeaderName == nil, headers.contains(where: { $0.name == name }) {
            duplicateHeaderName = name
        }
        if name == "authorization" { hasAuthorization = true }
        headers.append(APNsHeaderField(name, value))
    }

    mutating func appendBody(_ bytes: UnsafeBufferPointer<UInt8>) {
        bodyLength += bytes.count
        let room = Self.bodyCapacity - body.count
        if room > 0 { body.append(contentsOf: bytes.prefix(room)) }
    }

    /// Frees the headers and the body once the request has been planned.
    mutating func discardContent() {
        method = nil
        path = nil
        headers = []
        body = []
    }

    /// The value of a regular header (the first, if repeated).
    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// The answer a stream gets.
struct SimulatorResponse: Sendable, Hashable {
    var status: Int
    var apnsID: String
    /// Sent with 200 in the development environment.
    var uniqueID: String?
    /// The `reason` of an error body.
    var reason: String?
    /// The 410 body's `timestamp` (milliseconds since 1970).
    var timestampMilliseconds: Int64?
    var retryAfterSeconds: Int?
    /// The header the id goes back in: `apns-id`, or `apns-request-id` for broadcasts and channel
    /// management (Apple, "Sending channel management requests to APNs").
    var idHeaderName = "apns-id"
    /// Headers beyond the id's (`apns-channel-id` of a created channel).
    var extraHeaders: [APNsHeaderField] = []
    /// A success body (a channel's configuration, the list of channels); errors use `reason`.
    var successBody: [UInt8]?

    /// `{"reason":"..."}` (with `timestamp` for 410), the success body, or empty.
    var body: [UInt8] {
        guard let reason else { return successBody ?? [] }
        var out: [UInt8] = Array(#"{"reason":"#.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: reason.utf8)  // reasons are Apple's ASCII words; nothing to escape
        out.append(UInt8(ascii: "\""))
        if let timestampMilliseconds {
            out.append(contentsOf: #","timestamp":"#.utf8)
            out.append(contentsOf: String(timestampMilliseconds).utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

/// What the connection does with a stream whose request is complete.
struct StreamPlan: Sendable {
    enum Answer: Sendable {
        /// Send this response (after `delayNanoseconds`).
        case respond(SimulatorResponse)
        /// Never answer.
        case stall
        /// Leave unanswered because it lies above a GOAWAY's last-stream-id.
        case unprocessed
    }
    /// Where GOAWAY's last-stream-id falls relative to this stream.
    enum GoAway: Sendable {
        /// Last-stream-id = this stream (it is answered).
        case includingThisStream
        /// Last-stream-id = the highest stream processed before this one.
        case beforeThisStream
    }

    var answer: Answer
    var delayNanoseconds: UInt64 = 0
    var dropConnection = false
    var goAway: GoAway?
    var newMaxConcurrentStreams: UInt32?
}
