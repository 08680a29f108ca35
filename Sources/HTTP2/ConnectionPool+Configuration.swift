// How a pool is set up: endpoint, TLS, limits and timeouts, each with its default, and the one URL form
// (https://host[:port]) an endpoint may be given in.

extension ConnectionPool {
    /// How a pool connects and how much it holds.
    public struct Configuration: Sendable {
        /// Host name or IP address of the server.
        public var host: String
        /// TCP port. Default: 443.
        public var port: Int
        public var tls: TLSConfiguration
        /// Tunnel every connection through this HTTP proxy (CONNECT; TLS still verifies `host` end to end).
        /// Its refusals fail connects with the `.proxy…` codes, which count like any connect failure.
        /// Default: nil (direct).
        public var proxy: HTTPProxy?
        /// Connections to keep open (opened on first use). Default: 1.
        public var connectionCount: Int = 1
        /// The pool opens more connections, up to this many, while requests wait for a stream because every
        /// ready connection is at its stream limit: as many at once as the waiting requests need beyond the
        /// connections still connecting, and none before a first connection is ready (see `growIfSaturated`).
        /// A grown connection that closes is not replaced unless requests wait again. Default: nil (exactly
        /// `connectionCount`).
        public var maximumConnectionCount: Int?
        /// The pool grows only once the oldest waiting request has waited this long: a burst that the next
        /// freed streams absorb within a round trip of a nearby server is no reason for another connection;
        /// requests that wait a far server's round trip are. Default: 20 ms.
        public var growthWait: Duration = .milliseconds(20)
        /// A grown pool retires one connection beyond `connectionCount` once its streams in flight have stayed
        /// at most half of what one connection fewer could carry, with no request waiting, for this long (and
        /// another after as long again): after a backlog, the connections it grew for are given back, and a
        /// pool whose load comes back grows again. Checked at a quarter of it. Default: 60 s.
        public var shrinkAfter: Duration = .seconds(60)
        /// `maximumConnectionCount`, or `connectionCount` when it is not set.
        public var connectionCeiling: Int { max(connectionCount, maximumConnectionCount ?? connectionCount) }
        /// Our cap on concurrent streams per connection, on top of the server's limit. Default: 1000.
        public var maximumConcurrentStreamsPerConnection: Int = 1000
        /// Requests that may wait for a stream before `send` fails with `.poolSaturated`. Default: 10,000.
        public var maximumQueuedRequests: Int = 10_000
        /// TCP connect + TLS handshake + the server's first SETTINGS. Default: 10 s.
        public var connectTimeout: Duration = .seconds(10)
        /// From `send` to the complete response, queueing included. Checked every 100 ms. Default: 30 s.
        public var requestTimeout: Duration = .seconds(30)
        /// A PING is sent when nothing was read for this long. Default: 60 s.
        public var pingInterval: Duration = .seconds(60)
        /// A connection whose PING is not answered within this is closed as dead. Default: 10 s.
        public var pingTimeout: Duration = .seconds(10)
        /// Delay between failed connection attempts. Default: 100 ms doubling to 30 s, full jitter.
        public var reconnectBackoff = ExponentialBackoff(initial: .milliseconds(100), maximum: .seconds(30))
        /// Larger response bodies fail with `.responseTooLarge`. Default: 64 KiB.
        public var maximumResponseBodyBytes: Int = 64 * 1024
        /// A connection retires after this many streams (stream ids run out at 2^30 requests).
        var maximumStreamsPerConnection: Int = (1 << 30) - 10_000

        public init(host: String, port: Int = 443, tls: TLSConfiguration = TLSConfiguration()) {
            self.host = host
            self.port = port
            self.tls = tls
        }

        /// A configuration for `https://host[:port]` (the URL has no path, query or credentials).
        public init(url: String, tls: TLSConfiguration = TLSConfiguration()) throws(HTTP2ClientError) {
            let (host, port) = try Self.parse(url: url)
            self.init(host: host, port: port, tls: tls)
        }

        package static func parse(url: String) throws(HTTP2ClientError) -> (String, Int) {
            func bad(_ why: String) -> HTTP2ClientError {
                HTTP2ClientError(
                    .invalidConfiguration,
                    "invalid endpoint URL '\(url)': \(why); expected https://host[:port], e.g. "
                        + "https://api.sandbox.push.apple.com:443", endpoint: url)
            }
            guard url.hasPrefix("https://") else { throw bad("it must start with https://") }
            var rest = Substring(url.dropFirst("https://".count))
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            if rest.contains("/") || rest.contains("?") || rest.contains("@") || rest.contains("#") {
                throw bad("it must not have a path, query or user")
            }
            var host: Substring
            var portText: Substring?
            if rest.hasPrefix("[") {
                guard let close = rest.firstIndex(of: "]") else { throw bad("an IPv6 address needs a closing ]") }
                host = rest[rest.index(after: rest.startIndex)..<close]
                let after = rest[rest.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw bad("unexpected text after the IPv6 address") }
                    portText = after.dropFirst()
                }
            } else if let colon = rest.lastIndex(of: ":") {
                host = rest[..<colon]
                portText = rest[rest.index(after: colon)...]
            } else {
                host = rest
            }
            guard !host.isEmpty else { throw bad("the host is empty") }
            var port = 443
            if let portText {
                guard let number = Int(portText), (1...65535).contains(number) else {
                    throw bad("the port must be a number from 1 to 65535")
                }
                port = number
            }
            return (String(host), port)
        }
    }
}
