// A pool of HTTP/2 connections to one endpoint with one credential. This file holds its state and the
// lock-then-act pattern every path follows (decide under the lock, act on `Actions` after it); admission,
// connection lifecycle, configuration and statistics are in ConnectionPool+*.swift.

import Glibc
import Platform
import Synchronization

/// HTTP/2 connections to one endpoint, shared by many concurrent callers.
///
/// Requests go to the ready connection with the fewest open streams, never beyond a connection's
/// current stream limit (the server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by
/// `maximumConcurrentStreamsPerConnection`). When every stream is busy a request waits in a FIFO queue
/// of at most `maximumQueuedRequests`; past that, `send` fails at once with `.poolSaturated`, so memory
/// stays bounded and the caller sees back-pressure. Time spent waiting counts against the request timeout.
///
/// When connecting fails, the pool backs off exponentially with jitter; while it backs off with no
/// connection up, `send` fails at once with `.connectFailed` (its `retryAfter` says when the next attempt
/// is due) instead of queueing blind.
///
/// - Important: thread-safe; `send` may be called from any task. Call `shutdown()` when done.
public final class ConnectionPool: Sendable {

    struct Entry {
        let connection: HTTP2Connection
        var isReady = false
        var inFlight = 0
        var limit = 0
        /// Retired by the pool's shrinking, which lowered `targetConnections` already: its close must not.
        var shrunk = false
    }

    struct State {
        var entries: [Entry] = []
        /// Connections that take no new streams; their streams in flight still count until they end.
        var draining: [Entry] = []
        var waiters: BoundedQueue<HTTP2StreamTicket>
        /// Connections the pool keeps: `connectionCount`, grown up to `connectionCeiling` while requests wait.
        var targetConnections: Int
        var consecutiveFailures = 0
        var backoffUntil: UInt64 = 0
        var lastConnectError: HTTP2ClientError?
        var isShutDown = false
        var expiryScheduled = false
        /// A grown pool checks now and then whether it can give a connection back (`shrinkIfUnderused`).
        var shrinkCheckScheduled = false
        /// Since when the grown pool's streams have fitted in one connection fewer, at every check.
        var underusedSince: UInt64 = 0
        /// The highest stream limit any of its connections has had (capped by ours): what a new connection is
        /// expected to carry. Not the current limits: APNs has been seen to drop a connection's limit to 1 after
        /// a rejected request (a push with a bad token in 2016, openradar 27870881; a rejected provider token
        /// since) and to raise it after an accepted one, and sizing growth by that would open a connection per
        /// waiting request.
        var highestStreamLimit = 0
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        var connectFailures = 0
        var connectionsOpened = 0

        /// The least-loaded ready connection with a free stream, preferring those of the calling thread's
        /// event loop: a caller running on a loop (a task that prefers it as executor) then submits and is
        /// resumed without a thread hand-off. Callers are spread over the loops, so the load still spreads.
        func leastLoadedReady() -> Int? {
            var best: Int?
            var bestLoad = Int.max
            var local: Int?
            var localLoad = Int.max
            let thread = UInt(pthread_self())
            for index in entries.indices {
                let entry = entries[index]
                guard entry.isReady && entry.inFlight < entry.limit else { continue }
                if entry.inFlight < bestLoad {
                    best = index
                    bestLoad = entry.inFlight
                }
                if entry.inFlight < localLoad, entry.connection.loop.runs(onThread: thread) {
                    local = index
                    localLoad = entry.inFlight
                }
            }
            return local ?? best
        }

        func index(of connection: HTTP2Connection) -> Int? {
            entries.firstIndex { $0.connection === connection }
        }

        /// Takes the connection at `index` out of the dispatch set into `draining`, where its streams in
        /// flight still count until they end; the caller tells the connection to stop, on its loop.
        mutating func moveToDraining(_ index: Int, shrunk: Bool = false) -> HTTP2Connection {
            var entry = entries.remove(at: index)
            entry.shrunk = shrunk
            draining.append(entry)
            return entry.connection
        }
    }

    /// What to do once the lock is released.
    struct Actions {
        var dispatches: [(HTTP2Connection, HTTP2StreamTicket)] = []
        var starts: [HTTP2Connection] = []
        var failures: [(HTTP2StreamTicket, any Error)] = []
        var scheduleExpiry = false
        var scheduleShrinkCheck = false
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    }

    public let configuration: Configuration
    /// The `:authority` sent when a request leaves it empty: host, and port unless 443.
    public let authority: String
    /// `configuration.requestTimeout`, converted once (Duration arithmetic is 128-bit).
    let requestTimeoutNanoseconds: UInt64
    /// `configuration.growthWait`, converted once.
    let growthWaitNanoseconds: UInt64
    /// `configuration.shrinkAfter`, converted once.
    let shrinkAfterNanoseconds: UInt64
    let group: EventLoopGroup
    let tls: TLSContext
    let connectionSettings: HTTP2ConnectionSettings
    let state: Mutex<State>
    /// How often queued requests are checked against their deadlines.
    static let expiryInterval: UInt64 = 100_000_000

    /// Creates the pool; no connection is opened until the first `send`.
    ///
    /// Throws `.invalidConfiguration` when the TLS setup cannot work (unreadable CA file, client
    /// identity rejected) or a limit is out of range.
    public init(configuration: Configuration, group: EventLoopGroup = .shared) throws(HTTP2ClientError) {
        let settings = HTTP2ConnectionSettings(
            host: configuration.host, port: configuration.port,
            connectTimeout: configuration.connectTimeout.nanosecondsClamped,
            pingInterval: configuration.pingInterval.nanosecondsClamped,
            pingTimeout: configuration.pingTimeout.nanosecondsClamped,
            maximumResponseBodyBytes: configuration.maximumResponseBodyBytes,
            maximumConcurrentStreams: configuration.maximumConcurrentStreamsPerConnection,
            maximumStreamsPerConnection: configuration.maximumStreamsPerConnection, proxy: configuration.proxy)
        let endpoint = settings.endpoint
        func check(_ ok: Bool, _ what: String) throws(HTTP2ClientError) {
            if !ok { throw HTTP2ClientError(.invalidConfiguration, what, endpoint: endpoint) }
        }
        try check(!configuration.host.isEmpty, "the host is empty")
        try check((1...65535).contains(configuration.port), "port \(configuration.port) is not in 1...65535")
        try check(configuration.connectionCount >= 1, "connectionCount must be at least 1")
        try check(
            (configuration.maximumConnectionCount ?? configuration.connectionCount) >= configuration.connectionCount,
            "maximumConnectionCount must be at least connectionCount")
        try check(
            configuration.maximumConcurrentStreamsPerConnection >= 1,
            "maximumConcurrentStreamsPerConnection must be at least 1")
        try check(configuration.maximumQueuedRequests >= 1, "maximumQueuedRequests must be at least 1")
        try check(configuration.maximumResponseBodyBytes >= 0, "maximumResponseBodyBytes must not be negative")
        try check(
            configuration.requestTimeout > .zero && configuration.connectTimeout > .zero,
            "timeouts must be positive")
        self.configuration = configuration
        self.group = group
        self.connectionSettings = settings
        self.tls = try TLSContext(configuration: configuration.tls, host: configuration.host, endpoint: endpoint)
        let bracketed = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        self.authority = configuration.port == 443 ? bracketed : "\(bracketed):\(configuration.port)"
        requestTimeoutNanoseconds = configuration.requestTimeout.nanosecondsClamped
        growthWaitNanoseconds = configuration.growthWait.nanosecondsClamped
        shrinkAfterNanoseconds = configuration.shrinkAfter.nanosecondsClamped
        self.state = Mutex(
            State(
                waiters: BoundedQueue(capacity: configuration.maximumQueuedRequests),
                targetConnections: configuration.connectionCount))
    }

    /// `host:port` of the server.
    public var endpoint: String { connectionSettings.endpoint }

    func error(_ code: HTTP2ClientError.Code, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(code, message, endpoint: endpoint)
    }

    func perform(_ actions: Actions) {
        for connection in actions.starts {
            connection.loop.execute { connection.start() }
        }
        for (connection, ticket) in actions.dispatches {
            connection.loop.enqueue(.submit(connection, ticket))
        }
        for (ticket, failure) in actions.failures {
            ticket.finish(.failure(failure))
        }
        if actions.scheduleExpiry {
            group.loops[0].schedule(at: MonotonicClock.now() &+ Self.expiryInterval) { [self] in expireWaiters() }
        }
        if actions.scheduleShrinkCheck { scheduleShrinkCheck() }
        for waiter in actions.shutdownWaiters { waiter.resume() }
    }
}
