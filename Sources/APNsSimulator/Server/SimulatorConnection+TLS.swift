// The TLS side of the socket: the server handshake, then reads fed to nghttp2 and its frames written
// back, each bounded so that one busy or unread connection cannot starve its timers or grow memory.

import CNghttp2
import COpenSSL

extension SimulatorConnection {
    /// Continues the TLS handshake; false when it failed (the connection is then closed).
    func handshake() -> Bool {
        guard let ssl else { return false }
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeDone = true
            sslWantsWrite = false
            context.authentication.certificateTopics = ClientCertificateTopics.read(from: ssl)
            return startSession()
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            sslWantsWrite = false
            return true
        case SSL_ERROR_WANT_WRITE:
            sslWantsWrite = true
            return true
        case SSL_ERROR_SYSCALL, SSL_ERROR_ZERO_RETURN:
            engine.handshakeFailed(reason: "the client closed the connection during the TLS handshake")
            return false
        default:
            engine.handshakeFailed(reason: "TLS handshake failed: " + TLSServerContext.openSSLErrors())
            return false
        }
    }

    /// Reads whatever TLS has and feeds nghttp2; stops when the output backlog is large so a client
    /// that does not read its answers cannot grow memory.
    func readAvailable() {
        guard let ssl, let session else { return }
        // What the requests read here counted goes to the stats before their answers are written.
        defer { engine.report(&context) }
        sslWantsWrite = false
        readAgain = false
        var rounds = 0
        while !closeNow {
            if rounds == 16 {
                readAgain = true  // let timers and writes have a turn
                return
            }
            rounds += 1
            let count = readBuffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                let consumed = readBuffer.withUnsafeBufferPointer {
                    nghttp2_session_mem_recv(session, $0.baseAddress, Int(count))
                }
                if consumed < 0 {
                    // A dropped connection closes at once; otherwise nghttp2 has queued GOAWAY for the
                    // protocol error where it could: send it, then close.
                    if !closeNow { _ = flush() }
                    closeNow = true
                    return
                }
                if output.count - outputOffset > 256 * 1024 {
                    readAgain = true
                    return
                }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                return
            case SSL_ERROR_WANT_WRITE:
                sslWantsWrite = true
                return
            default:
                // Orderly close or a broken connection.
                closeNow = true
                return
            }
        }
    }

    /// Moves nghttp2's frames to the output buffer and writes as much as TLS takes.
    /// False when the connection broke.
    func flush() -> Bool {
        guard let ssl else { return false }
        if let session {
            while output.count - outputOffset < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 { return false }
                if length == 0 { break }
                if outputOffset > 0 && outputOffset == output.count {
                    output.removeAll(keepingCapacity: true)
                    outputOffset = 0
                }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            }
        }
        while outputOffset < output.count {
            let written = output.withUnsafeBytes {
                SSL_write(ssl, $0.baseAddress! + outputOffset, Int32(min(output.count - outputOffset, 1 << 20)))
            }
            if written > 0 {
                outputOffset += Int(written)
                continue
            }
            switch SSL_get_error(ssl, written) {
            case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
                return true
            default:
                return false
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 256 * 1024)
        outputOffset = 0
        return true
    }
}
