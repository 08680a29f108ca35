// The nghttp2 callback table, built once for every session: each C callback finds its connection in
// user_data and forwards to it. nghttp2 calls these only from inside mem_recv and mem_send.

import CNghttp2

/// The nghttp2 callbacks, created once; each forwards to the connection in `user_data`.
enum HTTP2SessionCallbacks {
    nonisolated(unsafe) static let shared: OpaquePointer = {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2 cannot allocate callbacks")
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let name, let value, let user else { return 0 }
            withConnection(user) {
                $0.onHeader(
                    streamID: frame.pointee.hd.stream_id,
                    name: UnsafeBufferPointer(start: name, count: nameLength),
                    value: UnsafeBufferPointer(start: value, count: valueLength))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            guard let data, let user else { return 0 }
            withConnection(user) {
                $0.onDataChunk(streamID: streamID, data: UnsafeBufferPointer(start: data, count: length))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            withConnection(user) { $0.onFrameReceived(frame) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            withConnection(user) { $0.onFrameSent(frame) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            guard let user else { return 0 }
            withConnection(user) { $0.onStreamClose(streamID: streamID, errorCode: errorCode) }
            return 0
        }
        return callbacks!
    }()

    /// Copies the next slice of a request body into nghttp2's DATA frame buffer.
    static let readRequestBody: nghttp2_data_source_read_callback = { _, _, buffer, length, flags, source, _ in
        guard let buffer, let flags, let pointer = source?.pointee.ptr else {
            return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        // Borrowed, as the connection is: the stream's ticket is held by the connection that is sending.
        return Unmanaged<HTTP2StreamTicket>.fromOpaque(pointer)._withUnsafeGuaranteedRef { ticket in
            let remaining = ticket.request.body.count - ticket.bodyOffset
            let count = min(remaining, length)
            ticket.request.body.withUnsafeBytes { body in
                buffer.update(
                    from: body.baseAddress!.assumingMemoryBound(to: UInt8.self) + ticket.bodyOffset, count: count)
            }
            ticket.bodyOffset += count
            if ticket.bodyOffset == ticket.request.body.count {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                ticket.request.body = []
                ticket.bodyOffset = 0
            }
            return count
        }
    }

    /// Calls `body` with the connection in `user_data`, borrowed: nghttp2 calls back only from inside the
    /// connection's own `mem_recv` and `mem_send`, which hold it, so a retain and a release per callback
    /// (several per request: 4% of the event loops' retains in `bench pipeline`) would guard nothing.
    @inline(__always)
    private static func withConnection(_ user: UnsafeMutableRawPointer, _ body: (HTTP2Connection) -> Void) {
        Unmanaged<HTTP2Connection>.fromOpaque(user)._withUnsafeGuaranteedRef(body)
    }
}
