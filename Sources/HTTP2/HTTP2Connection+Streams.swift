// Opening, cancelling and counting streams: the pool reserves a slot before it dispatches a request
// here, and every stream that ends (or never opens) gives its slot back through one batched report.

import CNghttp2

extension HTTP2Connection {
    /// Opens a stream for `ticket`. Loop thread; the pool has reserved a stream slot for it.
    func submit(_ ticket: HTTP2StreamTicket) {
        if ticket.isFinished {
            // Cancelled or timed out while queued for this loop.
            releaseStreamSlot()
            return
        }
        guard isReady, let session else {
            releaseStreamSlot()
            let why: String
            if case .goingAway(let away) = state {
                why = "the connection is going away (\(away.reason))"
            } else {
                why = "the connection is \(state.name)"
            }
            ticket.finish(.failure(HTTP2ClientError(.unprocessed, "not sent: \(why)", endpoint: endpoint)))
            return
        }
        var provider = nghttp2_data_provider()
        let hasBody = !ticket.request.body.isEmpty
        if hasBody {
            provider.source.ptr = Unmanaged.passUnretained(ticket).toOpaque()
            provider.read_callback = HTTP2SessionCallbacks.readRequestBody
        }
        let ticketPointer = Unmanaged.passUnretained(ticket).toOpaque()
        // nghttp2 takes the fields without copying them (NO_COPY_NAME and NO_COPY_VALUE: the copy, and the
        // lowercasing of names that came with it, were 1.5% of an event loop's time; figures:
        // docs/performance.md). So the packed list must stay as it is until the HEADERS frame is sent or
        // its stream closed: the ticket keeps it, unmutated, and `onFrameSent` / `onStreamClose` let it go.
        // A native array's storage does not move while it is neither mutated nor released.
        let streamID = ticket.request.fields.withUnsafeBytes { packed in
            headerFields.removeAll(keepingCapacity: true)
            // Never empty: a request always holds its four pseudo-headers.
            let base = UnsafeMutablePointer(mutating: packed.baseAddress!)
            PackedHeaderList.forEachField(in: packed) { field in
                headerFields.append(
                    nghttp2_nv(
                        name: base + field.nameStart, value: base + field.valueStart,
                        namelen: field.nameCount, valuelen: field.valueCount,
                        flags: field.isIndexable ? borrowedFlags : borrowedNoIndexFlags))
            }
            return headerFields.withUnsafeBufferPointer { fields in
                hasBody
                    ? nghttp2_submit_request(session, nil, fields.baseAddress, fields.count, &provider, ticketPointer)
                    : nghttp2_submit_request(session, nil, fields.baseAddress, fields.count, nil, ticketPointer)
            }
        }
        guard streamID > 0 else {
            releaseStreamSlot()
            let exhausted = streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue
            ticket.finish(
                .failure(
                    HTTP2ClientError(
                        exhausted ? .unprocessed : .protocolError,
                        "cannot open a stream: \(nghttp2Error(streamID))", endpoint: endpoint)))
            if exhausted { retire("stream ids exhausted") }
            return
        }
        ticket.streamID = streamID
        ticket.streamDeadline = loop.iterationTime &+ ticket.timeoutNanoseconds
        streams[streamID] = ticket
        streamsOpened += 1
        loop.markDirty(self)
        if streamsOpened >= settings.maximumStreamsPerConnection {
            retire("opened \(streamsOpened) streams, the most one connection may carry")
        }
    }

    /// Resets the ticket's stream (if open) and fails it with CancellationError. Loop thread.
    func cancel(_ ticket: HTTP2StreamTicket) {
        guard ticket.streamID != 0, !ticket.resolved, streams[ticket.streamID] === ticket, let session else {
            // Not opened yet (submit will skip it) or already answered.
            ticket.finish(.failure(CancellationError()))
            return
        }
        ticket.resolved = true
        nghttp2_submit_rst_stream(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ticket.streamID,
            NGHTTP2_CANCEL.rawValue)
        loop.complete(ticket, .failure(CancellationError()))
        loop.markDirty(self)
    }

    func releaseStreamSlot() {
        finishedSinceReport += 1
        loop.markNeedsReport(self)
    }

    /// Tells the pool how many dispatched streams ended since the last report. Loop thread.
    func reportFinishedStreams() {
        let count = finishedSinceReport
        finishedSinceReport = 0
        if count > 0 { delegate?.connection(self, didFinishStreams: count) }
    }
}
