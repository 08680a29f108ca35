// Ending a connection: retiring it (no new streams, close when the open ones end), saying GOAWAY when
// we are the side that ends it, and the one close that fails what is left and lets go of every handle.

import CNghttp2
import COpenSSL

extension HTTP2Connection {
    /// Stops taking streams (stream ids running out, or the pool shutting down) and closes once the
    /// open ones end.
    func retire(_ reason: String) {
        guard isReady else { return }
        state = .goingAway(GoingAway(lastStreamID: nil, reason: reason, wasReady: true))
        delegate?.connectionIsGoingAway(self)
        loop.markDirty(self)
    }

    /// Takes no new streams and closes when the open ones have ended, e.g. after the server answered
    /// that this connection is no good. Loop thread.
    func retireOnRequest(_ reason: String) {
        retire(reason)
    }

    /// Takes no new streams and closes when the open ones have ended. Loop thread.
    func closeGracefully() {
        switch state {
        case .ready:
            retire("the pool is shutting down")
        case .goingAway:
            loop.markDirty(self)
        case .closed:
            break
        case .idle, .resolving, .connecting, .tunneling, .handshaking, .awaitingSettings:
            close(nil)
        }
    }

    /// The last open stream of a retired connection has ended: GOAWAY if the server has not, then close.
    func finishGoingAway() {
        guard case .goingAway(let away) = state, let session else { return close(nil) }
        if away.lastStreamID == nil {
            // We are the side ending the connection: tell the server.
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            var frameBytes: UnsafePointer<UInt8>?
            while let produced = sendNextFrame(&frameBytes), produced > 0, let ssl {
                _ = SSL_write(ssl, frameBytes, Int32(produced))
            }
            if let ssl { SSL_shutdown(ssl) }
        }
        close(nil)
    }

    /// Closes the socket now, failing open streams, and tells the pool. Loop thread. Asked for from
    /// inside an nghttp2 callback, it only records the request; the call that called back closes once
    /// nghttp2 has returned (`receive`, `sendNextFrame`).
    func close(_ error: HTTP2ClientError?) {
        let wasReady: Bool
        switch state {
        case .closed: return
        case .ready: wasReady = true
        case .goingAway(let away): wasReady = away.wasReady
        case .idle, .resolving, .connecting, .tunneling, .handshaking, .awaitingSettings: wasReady = false
        }
        if sessionCallDepth > 0 {
            if deferredClose == nil { deferredClose = DeferredClose(error: error) }
            return
        }
        state = .closed
        let reason = error?.message ?? "the connection was closed"
        for ticket in streams.values where !ticket.resolved {
            ticket.resolved = true
            let streamError =
                ticket.headersSent
                ? HTTP2ClientError(
                    .connectionClosed,
                    "the connection was lost before the response arrived "
                        + "(\(reason)); the server may have processed the request", endpoint: endpoint)
                : HTTP2ClientError(
                    .unprocessed, "not sent: the connection closed first (\(reason))",
                    endpoint: endpoint)
            loop.complete(ticket, .failure(streamError))
        }
        streams.removeAll()
        lastLookedUp = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        if let ssl { SSL_free(ssl) }
        ssl = nil
        closeSocket()
        if registration != 0 { loop.unregister(registration) }
        outBuffer = []
        delegate?.connectionDidClose(self, error: error, wasReady: wasReady)
    }
}
