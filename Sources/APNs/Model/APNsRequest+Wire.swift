// An APNs request rendered as it goes on the wire: the HTTP/2 request the client sends (one packed
// header buffer) and the inspectable `APNsWireRequest`, both from one list of headers.

import HTTP2

extension APNsRequest {
    /// The request as it goes on the wire. Does not validate; see `validatedWire(providerToken:)`.
    ///
    /// - Parameter providerToken: the JWT for token authentication, sent as `authorization: bearer <JWT>`;
    ///   nil for certificate authentication, which sends no authorization header.
    public func wire(authorization providerToken: String?) -> APNsWireRequest {
        wire(authorizationValue: providerToken.map { "bearer " + $0 })
    }

    /// Validates, then renders (the hot path of the sender: the payload is serialised and checked
    /// once per payload, not per request).
    public func validatedWire(authorization providerToken: String?) throws(APNsInvalidRequest) -> APNsWireRequest {
        try validatedWire(authorizationValue: providerToken.map { "bearer " + $0 })
    }

    /// As `validatedWire(authorization:)`, with the whole `authorization` value (`bearer <JWT>`) made
    /// once per token rather than once per request.
    public func validatedWire(authorizationValue: String?) throws(APNsInvalidRequest) -> APNsWireRequest {
        let problems = validate()
        if !problems.isEmpty { throw APNsInvalidRequest(problems: problems) }
        return wire(authorizationValue: authorizationValue)
    }

    /// The HTTP/2 request the client sends, built straight from the fields (no intermediate wire
    /// request); the same headers in the same order as `wire(authorization:)`. Does not validate.
    ///
    /// Everything is written into the request's one packed header buffer: the path and the apns-id
    /// are rendered there directly, never made into Strings.
    ///
    /// HPACK may index the fields a connection repeats (authorization, topic, push type, priority), not
    /// `:path`, `apns-id`, `apns-expiration` and `apns-collapse-id`, which change with every request or
    /// event: indexing them churns the 4 KiB header table and evicts the ~200-byte bearer token, which then
    /// goes out again as a Huffman-coded literal on the next request (docs/performance.md has what that
    /// cost in `bench pipeline`, whose rules set a collapse id per event).
    func http2Request(authorizationValue: String?, authority: String) -> HTTP2Request {
        let (pathPrefix, pathLast) = pathParts
        let hex = pathLast.utf8
        let pathCount = pathPrefix.utf8CodeUnitCount + hex.count
        // Two passes over the same list: the sizes, then the bytes, into one exact allocation.
        var byteCount =
            PackedHeaderList.size(nameCount: 7, valueCount: 4)  // :method POST
            + PackedHeaderList.size(nameCount: 7, valueCount: 5)  // :scheme https
            + PackedHeaderList.size(nameCount: 10, valueCount: authority.utf8.count)
            + PackedHeaderList.size(nameCount: 5, valueCount: pathCount)
        forEachHeader(authorizationValue: authorizationValue) { name, value in
            switch value {
            case .text(let text), .perRequest(let text):
                byteCount += PackedHeaderList.size(nameCount: name.utf8CodeUnitCount, valueCount: text.utf8.count)
            case .id:
                byteCount += PackedHeaderList.size(nameCount: name.utf8CodeUnitCount, valueCount: APNsID.textLength)
            }
        }
        let fields = PackedHeaderList(byteCount: byteCount) { writer in
            writer.append(name: ":method", value: "POST", indexable: true)
            writer.append(name: ":scheme", value: "https", indexable: true)
            writer.append(name: ":authority", value: authority, indexable: true)
            writer.append(name: ":path", valueCount: pathCount, indexable: false) { buffer in
                let end = buffer.initialize(
                    fromContentsOf: UnsafeBufferPointer(
                        start: pathPrefix.utf8Start, count: pathPrefix.utf8CodeUnitCount))
                let rest = UnsafeMutableBufferPointer(rebasing: buffer[end...])
                if hex.withContiguousStorageIfAvailable({ _ = rest.initialize(fromContentsOf: $0) }) == nil {
                    _ = rest.initialize(fromContentsOf: Array(hex))
                }
            }
            forEachHeader(authorizationValue: authorizationValue) { name, value in
                switch value {
                case .text(let text):
                    writer.append(name: name, value: text, indexable: true)
                case .perRequest(let text):
                    writer.append(name: name, value: text, indexable: false)
                case .id(let id):
                    writer.append(name: name, valueCount: APNsID.textLength, indexable: false) { id.write(into: $0) }
                }
            }
        }
        return HTTP2Request(fields: fields, body: encodedPayload.bytes)
    }

    func wire(authorizationValue: String?) -> APNsWireRequest {
        var headers: [APNsHeaderField] = []
        headers.reserveCapacity(8)
        forEachHeader(authorizationValue: authorizationValue) { name, value in
            switch value {
            case .text(let text), .perRequest(let text): headers.append(APNsHeaderField(name.description, text))
            case .id(let id): headers.append(APNsHeaderField(name.description, id.string))
            }
        }
        return APNsWireRequest(
            method: "POST", scheme: "https", authority: environment.host, path: path, headers: headers,
            body: encodedPayload.bytes)
    }

    /// A header value as `forEachHeader` yields it: text a connection repeats, text of this request or
    /// event only, or an apns-id left for the renderer to write.
    enum HeaderValue {
        case text(String)
        case perRequest(String)
        case id(APNsID)
    }

    /// The regular headers in the order they are sent (see `APNsWireRequest`): the one list both
    /// renderings are made from.
    ///
    /// A broadcast (Apple, "Sending broadcast push notification requests to APNs") names its channel in
    /// `apns-channel-id` instead of a topic (the bundle id is in the path), and its id goes in
    /// `apns-request-id`, which APNs echoes back, instead of `apns-id`.
    @inline(__always)
    func forEachHeader(authorizationValue: String?, _ body: (StaticString, HeaderValue) -> Void) {
        if let authorizationValue { body("authorization", .text(authorizationValue)) }
        body("apns-push-type", .text(pushType.rawValue))
        switch target {
        case .device:
            body("apns-topic", .text(topic))
        case .channel(let channel):
            body("apns-channel-id", .text(channel.value))
        }
        body("apns-priority", .text(priority.headerValue))
        if let expiration = expiration.headerValue { body("apns-expiration", .perRequest(expiration)) }
        if let collapseID { body("apns-collapse-id", .perRequest(collapseID.value)) }
        if case .channel = target {
            body("apns-request-id", .id(apnsID))
        } else {
            body("apns-id", .id(apnsID))
        }
    }
}
