// The one error type of the HTTP/2 transport: a code to branch on, a message for people, and the
// endpoint it happened at.

/// A failure of the HTTP/2 transport (connection, TLS, stream or pool).
///
/// Compare errors by `code`; `message` says what went wrong and, where it helps, what would be right.
public struct HTTP2ClientError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What kind of failure this is. New codes may be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable, Hashable {
            case invalidConfiguration, connectFailed, connectTimeout, tlsHandshakeFailed
            case certificateVerificationFailed, http2NotNegotiated, connectionClosed, unprocessed
            case streamReset, requestTimeout, poolSaturated, poolShutDown, protocolError
            case responseTooLarge
            case proxyUnreachable, proxyAuthenticationRequired, proxyCredentialsRefused, proxyForbidden
            case proxyRefused
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        public var description: String { value.rawValue }

        /// The configuration cannot work (unreadable CA file, bad client identity, bad endpoint).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// Name resolution or the TCP connection failed.
        public static let connectFailed = Code(.connectFailed)
        /// TCP, TLS and the server's first SETTINGS did not all complete within the connect timeout.
        public static let connectTimeout = Code(.connectTimeout)
        /// The TLS handshake failed for a reason other than the server's certificate.
        public static let tlsHandshakeFailed = Code(.tlsHandshakeFailed)
        /// The server's certificate did not verify (unknown CA, wrong host name, expired).
        public static let certificateVerificationFailed = Code(.certificateVerificationFailed)
        /// The server did not select `h2` by ALPN.
        public static let http2NotNegotiated = Code(.http2NotNegotiated)
        /// The connection died while the request was in flight; the server may have processed it.
        public static let connectionClosed = Code(.connectionClosed)
        /// The server certainly did not process the request (GOAWAY above its last-stream-id,
        /// REFUSED_STREAM, or never sent): safe to retry on another connection.
        public static let unprocessed = Code(.unprocessed)
        /// The server reset the stream with an HTTP/2 error code before a complete response.
        public static let streamReset = Code(.streamReset)
        /// No complete response within the request timeout; the stream was reset.
        public static let requestTimeout = Code(.requestTimeout)
        /// Every stream was busy and the pool's wait queue was full.
        public static let poolSaturated = Code(.poolSaturated)
        /// The pool is shut down and takes no more requests.
        public static let poolShutDown = Code(.poolShutDown)
        /// The peer broke the HTTP/2 protocol or the session failed.
        public static let protocolError = Code(.protocolError)
        /// The response body exceeded the pool's cap; the stream was reset.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// The configured HTTP proxy could not be resolved or did not accept the TCP connection.
        public static let proxyUnreachable = Code(.proxyUnreachable)
        /// The proxy answered CONNECT with 407 and no credentials are configured.
        public static let proxyAuthenticationRequired = Code(.proxyAuthenticationRequired)
        /// The proxy answered CONNECT with 407 to the configured credentials.
        public static let proxyCredentialsRefused = Code(.proxyCredentialsRefused)
        /// The proxy answered CONNECT with 403: its rules do not allow the host or port.
        public static let proxyForbidden = Code(.proxyForbidden)
        /// The proxy answered CONNECT with another non-2xx status, or with something that is not HTTP.
        public static let proxyRefused = Code(.proxyRefused)

        /// The codes of a tunnel through an HTTP proxy that did not open.
        public static let proxyCodes: Set<Code> = [
            .proxyUnreachable, .proxyAuthenticationRequired, .proxyCredentialsRefused, .proxyForbidden,
            .proxyRefused,
        ]
    }

    public var code: Code
    /// What went wrong, for people; never contains secrets.
    public var message: String
    /// `host:port` of the server involved.
    public var endpoint: String
    /// When the failure is a connection failure in back-off, how long until the next attempt.
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String, endpoint: String, retryAfter: Duration? = nil) {
        self.code = code
        self.message = message
        self.endpoint = endpoint
        self.retryAfter = retryAfter
    }

    public var description: String { "\(endpoint): \(message)" }

    /// True when the server certainly did not act on the request, so sending it again cannot
    /// duplicate it.
    public var requestWasNotProcessed: Bool {
        code == .unprocessed || code == .poolSaturated || code == .poolShutDown || code == .connectFailed
            || code == .connectTimeout || code == .tlsHandshakeFailed || code == .certificateVerificationFailed
            || code == .http2NotNegotiated || code == .invalidConfiguration || Code.proxyCodes.contains(code)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
}
