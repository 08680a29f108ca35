// What the loop's tick checks: the connect deadline of each connecting phase, request deadlines, and
// the PINGs that find a silently dead connection (after a request's timeout, or a while without a read).

import CNghttp2

extension HTTP2Connection {
    /// Checks connect and request deadlines and sends or checks idle PINGs. Loop thread, every tick.
    func tick(now: UInt64) {
        let phase: String
        let connectDeadline: UInt64
        switch state {
        case .resolving(let deadline):
            (phase, connectDeadline) = ("resolving the host name", deadline)
        case .connecting(let attempt):
            let to = settings.proxy.map { " to the proxy \($0.endpoint)" } ?? ""
            (phase, connectDeadline) = ("waiting for the TCP connection\(to)", attempt.connectDeadline)
        case .tunneling(let tunnel):
            let proxy = settings.proxy?.endpoint ?? "?"
            (phase, connectDeadline) = ("waiting for the proxy \(proxy) to answer CONNECT", tunnel.connectDeadline)
        case .handshaking(let deadline):
            (phase, connectDeadline) = ("in the TLS handshake", deadline)
        case .awaitingSettings(let deadline):
            (phase, connectDeadline) = ("waiting for the server's HTTP/2 SETTINGS", deadline)
        case .ready, .goingAway:
            checkStreams(now: now)
            return
        case .idle, .closed:
            return
        }
        if now >= connectDeadline {
            close(
                HTTP2ClientError(
                    .connectTimeout,
                    "no connection within \(formatNanoseconds(settings.connectTimeout)) (stuck \(phase))",
                    endpoint: endpoint))
        }
    }

    private func checkStreams(now: UInt64) {
        guard let session else { return }
        if pingSentAt != 0 {
            if now &- pingSentAt >= settings.pingTimeout {
                close(
                    HTTP2ClientError(
                        .connectionClosed,
                        "the server did not answer a PING within \(formatNanoseconds(settings.pingTimeout)); "
                            + "the connection is presumed dead", endpoint: endpoint))
                return
            }
        } else if now &- lastReadAt >= settings.pingInterval {
            sendPing(session, now: now)
        }
        var timedOut = false
        for ticket in streams.values where !ticket.resolved && now >= ticket.streamDeadline {
            timedOut = true
            ticket.resolved = true
            nghttp2_submit_rst_stream(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ticket.streamID,
                NGHTTP2_CANCEL.rawValue)
            // HEADERS never written (the connection could not write for that long): the server cannot have
            // seen the request, which may then go again uncounted, like one refused by a GOAWAY.
            let error =
                ticket.headersSent
                ? HTTP2ClientError(
                    .requestTimeout,
                    "no response within \(formatNanoseconds(ticket.timeoutNanoseconds)); the stream was reset "
                        + "(the server may still have processed the request)", endpoint: endpoint)
                : HTTP2ClientError(
                    .unprocessed,
                    "not written within \(formatNanoseconds(ticket.timeoutNanoseconds)) (the connection could not "
                        + "send it); the stream was reset", endpoint: endpoint)
            loop.complete(ticket, .failure(error))
            loop.markDirty(self)
        }
        // A request without an answer is what a connection whose path went dark looks like (a partition, a
        // NAT or firewall that lost its state: no RST, no FIN), and the idle PING asks only after
        // `pingInterval` without a read, while the pool keeps sending on it. Asked now, a dead connection is
        // closed within `pingTimeout` of its first timeout and the pool's next connection carries the
        // retries; a live one answers at once and stays (test_apns_faults.py, the black-hole test).
        if timedOut, pingSentAt == 0 { sendPing(session, now: now) }
    }

    private func sendPing(_ session: OpaquePointer, now: UInt64) {
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        pingSentAt = now
        loop.markDirty(self)
    }
}
