// The HTTP/1.1 CONNECT exchange with a proxy, apart from the socket: the request bytes, reading the
// status line and headers (bounded), and turning a refusal into an error an operator can act on.

/// One CONNECT exchange: what is left to write, what has been read, and until when.
struct ProxyTunnel {
    /// The proxy's whole answer (status line and headers) must fit in this; a longer one is refused.
    static let maximumResponseHeaderBytes = 16 * 1024

    var connectDeadline: UInt64
    var request: [UInt8]
    var written = 0
    var response: [UInt8] = []

    init(connectDeadline: UInt64, target: String, credentials: HTTPProxy.Credentials?) {
        self.connectDeadline = connectDeadline
        self.request = Self.request(target: target, credentials: credentials)
    }

    /// `CONNECT host:port HTTP/1.1` with Host and, with credentials, Proxy-Authorization.
    static func request(target: String, credentials: HTTPProxy.Credentials?) -> [UInt8] {
        var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let credentials { text += "Proxy-Authorization: \(credentials.basicAuthorization)\r\n" }
        text += "User-Agent: apns-worker\r\n\r\n"
        return Array(text.utf8)
    }

    /// What the bytes read so far amount to.
    enum Answer: Equatable {
        /// The header block has not ended yet.
        case incomplete
        /// The status line and headers; `extraBytes` were read past them.
        case complete(status: Int, reason: String, extraBytes: Int)
        case malformed(String)
    }

    /// Parses the proxy's answer once its header block (ending in an empty line) is complete.
    static func parse(_ bytes: [UInt8]) -> Answer {
        guard let end = headerEnd(bytes) else {
            return bytes.count > maximumResponseHeaderBytes
                ? .malformed("its answer to CONNECT has more than \(maximumResponseHeaderBytes) bytes of headers")
                : .incomplete
        }
        guard end <= maximumResponseHeaderBytes else {
            return .malformed("its answer to CONNECT has more than \(maximumResponseHeaderBytes) bytes of headers")
        }
        let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\r")) ?? end
        let statusLine = String(decoding: bytes[..<lineEnd], as: UTF8.self)
        // HTTP/1.x SP status [SP reason]
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            let shown = statusLine.prefix(80).map { $0.isASCII && !$0.isNewline ? String($0) : "?" }.joined()
            return .malformed("it did not answer CONNECT with an HTTP/1.x status line (it sent '\(shown)')")
        }
        let reason = parts.count == 3 ? String(parts[2].prefix(80)) : ""
        return .complete(status: status, reason: reason, extraBytes: bytes.count - end)
    }

    /// The index just past the `\r\n\r\n` (or bare `\n\n`) that ends the header block.
    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "\r"),
                    bytes[index + 2] == UInt8(ascii: "\n")
                {
                    return index + 3
                }
            }
            index += 1
        }
        return nil
    }

    /// The error for a proxy that answered CONNECT with `status` instead of 2xx.
    static func refusal(
        status: Int, reason: String, proxy: HTTPProxy, target: String
    ) -> HTTP2ClientError {
        let answered =
            "the proxy \(proxy.endpoint) answered CONNECT \(target) with \(status)"
            + (reason.isEmpty ? "" : " \(reason)")
        switch status {
        // 407 is the proxy's "who are you"; some proxies (tinyproxy 1.11) answer wrong credentials with 401.
        case 407, 401:
            if let credentials = proxy.credentials {
                return HTTP2ClientError(
                    .proxyCredentialsRefused,
                    "\(answered): the proxy refused the credentials in \(credentials.source) (user "
                        + "'\(credentials.username)'); check the user name and password there",
                    endpoint: proxy.endpoint)
            }
            return HTTP2ClientError(
                .proxyAuthenticationRequired,
                "\(answered): the proxy requires authentication; set apns.proxy_credentials_file (or "
                    + "--proxy-credentials-file) to a file holding user:password",
                endpoint: proxy.endpoint)
        case 403:
            return HTTP2ClientError(
                .proxyForbidden,
                "\(answered): the proxy forbids CONNECT to \(target); allow that host and port in the proxy's "
                    + "rules (APNs uses port 443, or 2197)",
                endpoint: proxy.endpoint)
        default:
            let hint =
                switch status {
                case 502, 504: "the proxy could not reach \(target)"
                case 405, 501: "the proxy does not support CONNECT tunnels"
                default: "the proxy did not open the tunnel"
                }
            return HTTP2ClientError(.proxyRefused, "\(answered): \(hint)", endpoint: proxy.endpoint)
        }
    }
}
