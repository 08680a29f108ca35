// What `bench send` sends, made before the run so that the measured loop only picks a token and an
// apns-id: the APNs requests for the client layer, or prebuilt HTTP/2 requests for the transport layer.

import APNs
import HTTP2
import JSON

/// The notifications a bench sends: distinct device tokens cycled, one payload, a fresh apns-id each.
struct BenchSendWorkload: Sendable {
    let tokens: [DeviceToken]
    let template: APNsRequest
    let payload: [UInt8]
    /// The headers h2load sends: ours, with a same-length stand-in for the provider token.
    let h2loadHeaders: [String]

    var payloadByteCount: Int { payload.count }

    init(topic: String, payloadBytes: Int, distinctTokens: Int = 10_000) throws {
        var generator = SystemRandomNumberGenerator()
        tokens = try (0..<distinctTokens).map { _ in
            var bytes: [UInt8] = []
            for _ in 0..<4 { withUnsafeBytes(of: generator.next() as UInt64) { bytes += $0 } }
            return try DeviceToken(bytes: bytes)
        }
        let skeleton: JSONValue = [
            "aps": ["alert": ["title": "Bench", "body": "A notification from the bench"]],
            "pad": "",
        ]
        let padding = max(0, payloadBytes - skeleton.compactByteCount)
        let payloadValue: JSONValue = [
            "aps": ["alert": ["title": "Bench", "body": "A notification from the bench"]],
            "pad": .string(String(repeating: "x", count: padding)),
        ]
        payload = payloadValue.compactBytes
        template = APNsRequest(
            deviceToken: tokens[0], environment: .production, topic: topic, pushType: .alert,
            payload: payloadValue)
        let sample = template.wire(authorization: String(repeating: "j", count: Self.jwtLength))
        h2loadHeaders = sample.headers.map { "\($0.name): \($0.value)" }
    }

    /// An ES256 JWT with a 10-character kid and iss is 4 + 1 + ~75 + 1 + 86 characters; the stand-in
    /// matches that so HPACK sees the same sizes.
    static let jwtLength = 166

    private(set) var transportTemplate: BenchSendTransportTemplate?

    mutating func prepareTransportRequests(authorization: String?, authority: String) {
        let wire = template.wire(authorization: authorization)
        transportTemplate = BenchSendTransportTemplate(
            method: wire.method, authority: authority,
            headers: wire.headers.map { HTTP2Header($0.name, $0.value, isIndexable: $0.name != "apns-id") },
            body: wire.body)
    }

    func transportRequest(_ index: Int, template: BenchSendTransportTemplate) -> HTTP2Request {
        // Built whole, as a caller of the transport would: setting fields of a made request repacks it.
        var headers = template.headers
        if let last = headers.indices.last, headers[last].name == "apns-id" {
            headers[last].value = APNsID.random().string
        }
        var request = HTTP2Request(
            method: template.method, scheme: "https", authority: template.authority,
            path: "/3/device/" + tokens[index % tokens.count].hex, headers: headers, body: template.body)
        request.isPathIndexable = false
        return request
    }

    func request(_ index: Int) -> APNsRequest {
        var request = template
        request.target = .device(tokens[index % tokens.count])
        request.apnsID = .random()
        return request
    }
}
