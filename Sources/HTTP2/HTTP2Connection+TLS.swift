// The TLS handshake over the connected socket, and turning its failures into errors that say what to
// fix: an untrusted certificate, a server without HTTP/2, a peer that is not a TLS server.

import COpenSSL
import Glibc

extension HTTP2Connection {
    func continueHandshake() {
        guard let ssl else { return }
        OpenSSLError.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeCompleted()
            return
        }
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: setInterest(writable: false)
        case SSL_ERROR_WANT_WRITE: setInterest(writable: true)
        default: close(handshakeError(code))
        }
    }

    private func handshakeError(_ code: Int32) -> HTTP2ClientError {
        let verifyResult = ssl.map { SSL_get_verify_result($0) } ?? Int(X509_V_OK)
        if verifyResult != Int(X509_V_OK) {
            let reason = String(cString: X509_verify_cert_error_string(verifyResult))
            OpenSSLError.clear()
            return HTTP2ClientError(
                .certificateVerificationFailed,
                "the server's certificate was rejected: \(reason) (verified for '\(tls.serverName)' against "
                    + "\(tls.trustDescription); for a test server pass its CA with a CA file)",
                endpoint: endpoint)
        }
        let details = OpenSSLError.drain()
        if details.contains("no application protocol") {
            return HTTP2ClientError(
                .http2NotNegotiated,
                "the server refused ALPN 'h2' (TLS alert no_application_protocol); it does not speak HTTP/2, "
                    + "which APNs requires", endpoint: endpoint)
        }
        if code == SSL_ERROR_SYSCALL || code == SSL_ERROR_ZERO_RETURN, details == "no details" {
            let reason = errno == 0 ? "" : " (\(String(cString: strerror(errno))))"
            return HTTP2ClientError(
                .tlsHandshakeFailed,
                "the server closed the connection during the TLS handshake\(reason); is it a TLS server?",
                endpoint: endpoint)
        }
        return HTTP2ClientError(.tlsHandshakeFailed, "TLS handshake failed: \(details)", endpoint: endpoint)
    }

    /// Checks that ALPN chose h2, then starts the HTTP/2 session.
    private func handshakeCompleted() {
        guard let ssl, case .handshaking(let connectDeadline) = state else { return }
        var protocolBytes: UnsafePointer<UInt8>?
        var protocolLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolBytes, &protocolLength)
        let selected =
            protocolBytes.map {
                String(decoding: UnsafeBufferPointer(start: $0, count: Int(protocolLength)), as: UTF8.self)
            } ?? ""
        guard selected == "h2" else {
            let what = selected.isEmpty ? "no protocol" : "'\(selected)'"
            close(
                HTTP2ClientError(
                    .http2NotNegotiated,
                    "the server did not select HTTP/2 by ALPN (it selected \(what)); APNs and this client need 'h2'",
                    endpoint: endpoint))
            return
        }
        startSession(connectDeadline: connectDeadline)
    }
}
