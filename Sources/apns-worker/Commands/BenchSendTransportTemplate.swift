// The transport layer's request skeleton: made once per run, so the engine alone is measured.

import HTTP2

/// For the transport layer: the parts of the wire request that stay fixed (all but path and apns-id).
struct BenchSendTransportTemplate {
    var method: String
    var authority: String
    var headers: [HTTP2Header]
    var body: [UInt8]
}
