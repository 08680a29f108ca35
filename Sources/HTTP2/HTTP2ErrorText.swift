// Words for error messages: nghttp2's error strings, HTTP/2 error code names, and durations.

import CNghttp2

func nghttp2Error(_ code: Int32) -> String {
    String(cString: nghttp2_strerror(code))
}

func http2ErrorName(_ code: UInt32) -> String {
    switch code {
    case NGHTTP2_NO_ERROR.rawValue: return "NO_ERROR"
    case NGHTTP2_PROTOCOL_ERROR.rawValue: return "PROTOCOL_ERROR"
    case NGHTTP2_INTERNAL_ERROR.rawValue: return "INTERNAL_ERROR"
    case NGHTTP2_FLOW_CONTROL_ERROR.rawValue: return "FLOW_CONTROL_ERROR"
    case NGHTTP2_SETTINGS_TIMEOUT.rawValue: return "SETTINGS_TIMEOUT"
    case NGHTTP2_STREAM_CLOSED.rawValue: return "STREAM_CLOSED"
    case NGHTTP2_FRAME_SIZE_ERROR.rawValue: return "FRAME_SIZE_ERROR"
    case NGHTTP2_REFUSED_STREAM.rawValue: return "REFUSED_STREAM"
    case NGHTTP2_CANCEL.rawValue: return "CANCEL"
    case NGHTTP2_COMPRESSION_ERROR.rawValue: return "COMPRESSION_ERROR"
    case NGHTTP2_CONNECT_ERROR.rawValue: return "CONNECT_ERROR"
    case NGHTTP2_ENHANCE_YOUR_CALM.rawValue: return "ENHANCE_YOUR_CALM"
    case NGHTTP2_INADEQUATE_SECURITY.rawValue: return "INADEQUATE_SECURITY"
    case NGHTTP2_HTTP_1_1_REQUIRED.rawValue: return "HTTP_1_1_REQUIRED"
    default: return "error code \(code)"
    }
}

func formatNanoseconds(_ nanoseconds: UInt64) -> String {
    if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000) s" }
    return "\(nanoseconds / 1_000_000) ms"
}
