// The connection's nghttp2 server session: its callbacks collect each stream's request, and the
// session-wide frames (SETTINGS when the faults change, GOAWAY on stop) go out from here.

import APNs
import CNghttp2

extension SimulatorConnection {
    func startSession() -> Bool {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { return false }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            SimulatorConnection.from(user).onBeginHeaders(frame!)
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            SimulatorConnection.from(user).onHeader(frame!, name!, nameLength, value!, valueLength)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            SimulatorConnection.from(user).onData(streamID, UnsafeBufferPointer(start: data, count: length))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            SimulatorConnection.from(user).onFrame(frame!)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            SimulatorConnection.from(user).onStreamClose(streamID)
        }
        var session: OpaquePointer?
        let user = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new(&session, callbacks, user) == 0, let session else { return false }
        self.session = session
        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: announcedMaxConcurrentStreams)
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
        engine.connectionEstablished(id: id)
        return true
    }

    static func from(_ user: UnsafeMutableRawPointer?) -> SimulatorConnection {
        Unmanaged<SimulatorConnection>.fromOpaque(user!).takeUnretainedValue()
    }

    func onBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        let id = frame.pointee.hd.stream_id
        streams[id] = StreamState(id: id)
        openStreams += 1
        if openStreams > peakOpenStreams {
            peakOpenStreams = openStreams
            context.tally.peakStreams = peakOpenStreams
        }
        return 0
    }

    func onHeader(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafePointer<UInt8>, _ nameLength: Int,
        _ value: UnsafePointer<UInt8>, _ valueLength: Int
    ) -> Int32 {
        // Only the request's header block; trailers would otherwise read as repeated headers.
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            let stream = streams[frame.pointee.hd.stream_id]
        else { return 0 }
        // Bounded memory: a request's header block may hold at most 16 KiB (APNs requests need under
        // 1 KiB); beyond that the stream is reset.
        stream.headerBytes += nameLength + valueLength
        if stream.headerBytes > 16 * 1024 { return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue }
        let nameBytes = UnsafeBufferPointer(start: name, count: nameLength)
        let valueString = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
        if nameLength > 0 && name[0] == UInt8(ascii: ":") {
            if ASCIIBytes.equal(nameBytes, ":method") {
                stream.request.method = valueString
            } else if ASCIIBytes.equal(nameBytes, ":path") {
                stream.request.path = valueString
            }
            return 0
        }
        stream.request.addHeader(name: Self.headerName(nameBytes), value: valueString)
        return 0
    }

    /// The names APNs requests carry, kept as strings made once: a request's nine or so header names then
    /// cost no allocation. Matched by `ASCIIBytes.equal` (a `String.UTF8View` walk per candidate cost more
    /// than the allocation it saved).
    static let knownHeaderNames: [(bytes: [UInt8], name: String)] = [
        "authorization", "apns-id", "apns-push-type", "apns-topic", "apns-priority", "apns-expiration",
        "apns-collapse-id", "content-length", "content-type", "user-agent", "accept-encoding",
    ].map { (Array($0.utf8), $0) }

    static func headerName(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        for known in knownHeaderNames where known.bytes.withUnsafeBufferPointer({ ASCIIBytes.equal($0, bytes) }) {
            return known.name
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func onData(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) -> Int32 {
        streams[streamID]?.request.appendBody(data)
        return 0
    }

    func onFrame(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = frame.pointee.hd.type
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            let stream = streams[frame.pointee.hd.stream_id], !stream.planned
        else { return 0 }
        stream.planned = true
        handleComplete(stream)
        // Stops nghttp2 from processing the rest of the input of a connection being dropped.
        return closeNow ? NGHTTP2_ERR_CALLBACK_FAILURE.rawValue : 0
    }

    func onStreamClose(_ streamID: Int32) -> Int32 {
        if streams.removeValue(forKey: streamID) != nil { openStreams -= 1 }
        return 0
    }

    /// True when there is nothing left to do: nghttp2 wants neither to read nor write (e.g. after a
    /// protocol error), or after our GOAWAY every answerable stream has been answered.
    func finished() -> Bool {
        guard let session, outputOffset >= output.count else { return false }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 { return true }
        if goAwayLastStreamID != nil && timers.isEmpty && nghttp2_session_want_write(session) == 0 { return true }
        return false
    }

    /// On stop: GOAWAY Shutdown, one non-blocking attempt to send it, and close.
    func shutDownGracefully() {
        guard handshakeDone, let session else { return }
        submitGoAway(lastStreamID: nghttp2_session_get_last_proc_stream_id(session))
        _ = flush()
    }

    func applyChangedFaults() {
        guard let session else { return }
        let (faults, generation) = engine.currentFaults(ifNewerThan: faultsGeneration) ?? (nil, faultsGeneration)
        faultsGeneration = generation
        if let faults, faults.maxConcurrentStreams != announcedMaxConcurrentStreams {
            announce(maxConcurrentStreams: faults.maxConcurrentStreams, session: session)
        }
    }

    func announce(maxConcurrentStreams: UInt32, session: OpaquePointer) {
        announcedMaxConcurrentStreams = maxConcurrentStreams
        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams)
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
    }

    static let shutdownDebugData: [UInt8] = Array(#"{"reason":"Shutdown"}"#.utf8)

    func submitGoAway(lastStreamID: Int32) {
        guard let session, goAwayLastStreamID == nil else { return }
        goAwayLastStreamID = lastStreamID
        Self.shutdownDebugData.withUnsafeBufferPointer {
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID,
                NGHTTP2_NO_ERROR.rawValue, $0.baseAddress, $0.count)
        }
        engine.goAwaySent()
    }
}
