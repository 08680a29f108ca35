// Moving bytes once the session is up: epoll events in, TLS reads fed to nghttp2, and every pending frame
// gathered into one buffer per flush so that many streams share an SSL_write.

import CNghttp2
import COpenSSL
import Glibc

extension HTTP2Connection {
    /// Called by the loop with the epoll events of this connection's socket.
    func handleEvents(_ events: UInt32) {
        switch state {
        case .connecting:
            finishTCPConnect()
        case .tunneling:
            continueTunnel()
        case .handshaking:
            continueHandshake()
        case .awaitingSettings, .ready, .goingAway:
            if events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 {
                readAvailable()
            }
            if !isClosed, events & EPOLLOUT.rawValue != 0 {
                loop.markDirty(self)
            }
        case .idle, .resolving, .closed:
            break
        }
    }

    func readAvailable() {
        guard let ssl, session != nil else { return }
        let buffer = loop.readBuffer
        let bytes = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        while true {
            let count = SSL_read(ssl, bytes, Int32(buffer.count))
            if count > 0 {
                lastReadAt = loop.iterationTime
                guard let consumed = receive(bytes, count: Int(count)) else { return }
                if consumed < 0 {
                    close(
                        HTTP2ClientError(
                            .protocolError,
                            "the HTTP/2 session failed on data from the server: \(nghttp2Error(Int32(consumed)))",
                            endpoint: endpoint))
                    return
                }
                if isClosed { return }
                // Level-triggered epoll calls again if the socket still has data; skip the EAGAIN read.
                if Int(count) < buffer.count && SSL_has_pending(ssl) == 0 { break }
                continue
            }
            let code = SSL_get_error(ssl, count)
            if code == SSL_ERROR_WANT_READ { break }
            if code == SSL_ERROR_WANT_WRITE {
                setInterest(writable: true)
                break
            }
            let details = code == SSL_ERROR_SSL ? OpenSSLError.drain() : ""
            peerClosed(code == SSL_ERROR_SSL ? "TLS error: \(details)" : "the server closed the connection")
            return
        }
        loop.markDirty(self)
    }

    func peerClosed(_ reason: String) {
        if case .goingAway = state, streams.isEmpty {
            close(nil)
        } else {
            close(HTTP2ClientError(.connectionClosed, reason, endpoint: endpoint))
        }
    }

    /// Serializes every pending frame into one buffer and writes it with as few SSL_write calls as the
    /// socket allows. Loop thread; the loop calls it once per wake-up for each dirty connection.
    func flush() {
        // A session exists only while awaiting SETTINGS, ready or going away.
        guard let ssl, session != nil else { return }
        while true {
            if outOffset == outBuffer.count {
                outBuffer.removeAll(keepingCapacity: true)
                outOffset = 0
            }
            while outBuffer.count - outOffset < Self.outputBatchBytes {
                var frameBytes: UnsafePointer<UInt8>?
                guard let produced = sendNextFrame(&frameBytes) else { return }
                if produced < 0 {
                    close(
                        HTTP2ClientError(
                            .protocolError,
                            "the HTTP/2 session failed to send: "
                                + nghttp2Error(Int32(produced)), endpoint: endpoint))
                    return
                }
                if produced == 0 { break }
                outBuffer.append(contentsOf: UnsafeBufferPointer(start: frameBytes, count: produced))
            }
            if outOffset == outBuffer.count { break }
            let pending = outBuffer.count - outOffset
            let written = outBuffer.withUnsafeBytes { raw in
                SSL_write(ssl, raw.baseAddress! + outOffset, Int32(pending))
            }
            if written > 0 {
                outOffset += Int(written)
                continue
            }
            let code = SSL_get_error(ssl, written)
            if code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ {
                setInterest(writable: true)
                return
            }
            let details = code == SSL_ERROR_SSL ? OpenSSLError.drain() : String(cString: strerror(errno))
            peerClosed("writing to the server failed: \(details)")
            return
        }
        setInterest(writable: false)
        guard let session else { return }
        if case .goingAway = state, streams.isEmpty {
            finishGoingAway()
        } else if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(
                streams.isEmpty
                    ? nil
                    : HTTP2ClientError(.connectionClosed, "the HTTP/2 session ended", endpoint: endpoint))
        }
    }
}
