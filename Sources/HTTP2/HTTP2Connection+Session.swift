// The nghttp2 session: creating it, the only two calls through which nghttp2 calls back (each guarded so
// that a close asked for from a callback waits until nghttp2 has returned), and what the callbacks do
// with headers, data, frames and stream closes.

import CNghttp2

extension HTTP2Connection {
    /// Creates the client session, queues our SETTINGS and reads what the server already sent.
    func startSession(connectDeadline: UInt64) {
        var newSession: OpaquePointer?
        let created = nghttp2_session_client_new(
            &newSession, HTTP2SessionCallbacks.shared,
            Unmanaged.passUnretained(self).toOpaque())
        guard created == 0, let newSession else {
            close(
                HTTP2ClientError(
                    .protocolError, "cannot create an HTTP/2 session: \(nghttp2Error(created))",
                    endpoint: endpoint))
            return
        }
        session = newSession
        var entries = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        nghttp2_submit_settings(newSession, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        state = .awaitingSettings(connectDeadline: connectDeadline)
        lastReadAt = loop.iterationTime
        setInterest(writable: false)
        loop.markDirty(self)
        // The server's SETTINGS often arrive with the last handshake flight and sit in OpenSSL's buffer.
        readAvailable()
    }

    // MARK: Calls that call back

    /// nghttp2_session_mem_recv: processes `count` bytes from the server, calling back for each frame.
    /// Nil when the connection is closed on return (a close asked for from a callback runs here), so the
    /// caller cannot go on using the session.
    @inline(__always)
    func receive(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int? {
        guard let session else { return nil }
        sessionCallDepth &+= 1
        let consumed = nghttp2_session_mem_recv(session, bytes, count)
        sessionCallDepth &-= 1
        return closeIfDeferred() ? nil : consumed
    }

    /// nghttp2_session_mem_send: the next serialized frame (0 bytes when none is due), calling back as
    /// frames leave. Nil when the connection is closed on return, as for `receive`.
    @inline(__always)
    func sendNextFrame(_ frameBytes: inout UnsafePointer<UInt8>?) -> Int? {
        guard let session else { return nil }
        sessionCallDepth &+= 1
        let produced = nghttp2_session_mem_send(session, &frameBytes)
        sessionCallDepth &-= 1
        return closeIfDeferred() ? nil : produced
    }

    /// Runs the close deferred during the outermost nghttp2 call, once it has returned.
    @inline(__always)
    private func closeIfDeferred() -> Bool {
        guard sessionCallDepth == 0, let deferred = deferredClose else { return false }
        deferredClose = nil
        close(deferred.error)
        return true
    }

    // MARK: Callbacks (loop thread, inside `receive` / `sendNextFrame`)

    /// The open stream's ticket, looked up once for a run of callbacks about the same stream.
    @inline(__always)
    func ticket(forStream streamID: Int32) -> HTTP2StreamTicket? {
        if let lastLookedUp, lastLookedUp.streamID == streamID { return lastLookedUp.ticket }
        guard let ticket = streams[streamID] else { return nil }
        lastLookedUp = (streamID, ticket)
        return ticket
    }

    func onHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let ticket = ticket(forStream: streamID), !ticket.resolved else { return }
        if name.first == UInt8(ascii: ":") {
            if name.count == 7, value.count == 3, name.elementsEqual(":status".utf8) {
                ticket.status = value.reduce(0) { $0 * 10 + Int($1 &- 48) }
            }
            return
        }
        ticket.responseHeaders.append(name: name, value: value)
    }

    func onDataChunk(streamID: Int32, data: UnsafeBufferPointer<UInt8>) {
        guard let ticket = ticket(forStream: streamID), !ticket.resolved, let session else { return }
        if ticket.responseBody.count + data.count > settings.maximumResponseBodyBytes {
            ticket.resolved = true
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
            loop.complete(
                ticket,
                .failure(
                    HTTP2ClientError(
                        .responseTooLarge,
                        "the response body exceeded \(settings.maximumResponseBodyBytes) bytes; the stream was reset",
                        endpoint: endpoint)))
            return
        }
        ticket.responseBody.append(contentsOf: data)
    }

    func onFrameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
                let ticket = ticket(forStream: header.stream_id)
            {
                ticket.endStreamReceived = true
            }
        case NGHTTP2_SETTINGS.rawValue:
            guard header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0, let session else { return }
            let announced = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            let limit = min(Int(announced), settings.maximumConcurrentStreams)
            let previous = streamLimit
            streamLimit = limit
            if case .awaitingSettings = state {
                state = .ready
                delegate?.connectionDidBecomeReady(self, streamLimit: limit)
            } else if limit != previous, isReady {
                delegate?.connection(self, streamLimitChangedTo: limit)
            }
        case NGHTTP2_GOAWAY.rawValue:
            receivedGoaway(frame.pointee.goaway)
        case NGHTTP2_PING.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { pingSentAt = 0 }
        default:
            break
        }
    }

    private func receivedGoaway(_ goaway: nghttp2_goaway) {
        var detail = "GOAWAY last-stream-id \(goaway.last_stream_id), \(http2ErrorName(goaway.error_code))"
        if goaway.opaque_data_len > 0, let data = goaway.opaque_data {
            let text = String(
                decoding: UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 200)),
                as: UTF8.self)
            detail += ", debug data \(text)"
        }
        switch state {
        case .ready:
            state = .goingAway(GoingAway(lastStreamID: goaway.last_stream_id, reason: detail, wasReady: true))
            delegate?.connectionIsGoingAway(self)
        case .awaitingSettings:
            // Never ready, so the pool has nothing to take back.
            state = .goingAway(GoingAway(lastStreamID: goaway.last_stream_id, reason: detail, wasReady: false))
        case .goingAway(var away):
            away.lastStreamID = goaway.last_stream_id
            away.reason = detail
            state = .goingAway(away)
        case .idle, .resolving, .connecting, .tunneling, .handshaking, .closed:
            break
        }
        loop.markDirty(self)
    }

    func onFrameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        if UInt32(header.type) == NGHTTP2_HEADERS.rawValue, let ticket = ticket(forStream: header.stream_id) {
            ticket.headersSent = true
            // nghttp2 has encoded the fields it borrowed (see `submit`).
            ticket.request.fields = PackedHeaderList()
        }
    }

    func onStreamClose(streamID: Int32, errorCode: UInt32) {
        if lastLookedUp?.streamID == streamID { lastLookedUp = nil }
        guard let ticket = streams.removeValue(forKey: streamID) else { return }
        // Closed before its HEADERS frame went out, if it did: nghttp2 is done with the borrowed fields.
        ticket.request.fields = PackedHeaderList()
        releaseStreamSlot()
        guard !ticket.resolved else { return }
        ticket.resolved = true
        if ticket.endStreamReceived && ticket.status != 0 {
            loop.complete(
                ticket,
                .success(
                    HTTP2Response(
                        status: ticket.status, headerFields: ticket.responseHeaders,
                        body: ticket.responseBody, connectionID: id)))
            return
        }
        let error: HTTP2ClientError
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            var why = "the server refused the stream (REFUSED_STREAM)"
            if case .goingAway(let away) = state, let lastStreamID = away.lastStreamID, streamID > lastStreamID {
                why = "the server sent GOAWAY before processing it (\(away.reason))"
            }
            error = HTTP2ClientError(
                .unprocessed, "not processed: \(why); safe to retry on another connection",
                endpoint: endpoint)
        } else {
            error = HTTP2ClientError(
                .streamReset,
                "the server reset the stream (\(http2ErrorName(errorCode))) "
                    + "before a complete response", endpoint: endpoint)
        }
        loop.complete(ticket, .failure(error))
    }
}
