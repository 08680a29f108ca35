// A pool of HTTP/2 connections to one endpoint with one credential: opens connections lazily, sends each
// request on the least-loaded connection with a free stream, queues (boundedly) when every stream is
// busy, replaces dead connections, and backs off when connecting fails.
import Synchronization
import Glibc
import Platform

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
    /// How a pool connects and how much it holds.
    public struct Configuration: Sendable {
        /// Host name or IP address of the server.
        public var host: String
        /// TCP port. Default: 443.
        public var port: Int
        public var tls: TLSConfiguration
        /// Connections to keep open (opened on first use). Default: 1.
        public var connectionCount: Int = 1
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
                HTTP2ClientError(.invalidConfiguration,
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

    /// A snapshot of the pool, for metrics and tests.
    public struct Statistics: Sendable, Hashable {
        /// Connections ready to take streams.
        public var readyConnections: Int
        /// Connections still connecting.
        public var connectingConnections: Int
        /// Connections that stopped taking streams and close when their streams end.
        public var drainingConnections: Int
        /// Streams dispatched to ready connections and not yet ended.
        public var streamsInFlight: Int
        /// Streams the ready connections may carry at once: the sum of their current limits (the server's
        /// SETTINGS_MAX_CONCURRENT_STREAMS, capped by `maximumConcurrentStreamsPerConnection`).
        public var streamCapacity: Int
        /// Requests waiting for a free stream.
        public var queuedRequests: Int
        /// Failed connection attempts since the pool was created.
        public var connectFailures: Int
        /// Connections opened since the pool was created.
        public var connectionsOpened: Int
    }

    private struct Entry {
        let connection: HTTP2Connection
        var isReady = false
        var inFlight = 0
        var limit = 0
    }

    private struct State {
        var entries: [Entry] = []
        /// Connections that take no new streams; their streams in flight still count until they end.
        var draining: [Entry] = []
        var waiters: BoundedQueue<HTTP2StreamTicket>
        var consecutiveFailures = 0
        var backoffUntil: UInt64 = 0
        var lastConnectError: HTTP2ClientError?
        var isShutDown = false
        var expiryScheduled = false
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
    }

    /// What to do once the lock is released.
    private struct Actions {
        var dispatches: [(HTTP2Connection, HTTP2StreamTicket)] = []
        var starts: [HTTP2Connection] = []
        var failures: [(HTTP2StreamTicket, any Error)] = []
        var scheduleExpiry = false
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    }

    public let configuration: Configuration
    /// The `:authority` sent when a request leaves it empty: host, and port unless 443.
    public let authority: String
    /// `configuration.requestTimeout`, converted once (Duration arithmetic is 128-bit).
    private let requestTimeoutNanoseconds: UInt64
    private let group: EventLoopGroup
    private let tls: TLSContext
    private let connectionSettings: HTTP2ConnectionSettings
    private let state: Mutex<State>
    /// How often queued requests are checked against their deadlines.
    private static let expiryInterval: UInt64 = 100_000_000

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
            maximumStreamsPerConnection: configuration.maximumStreamsPerConnection)
        let endpoint = settings.endpoint
        func check(_ ok: Bool, _ what: String) throws(HTTP2ClientError) {
            if !ok { throw HTTP2ClientError(.invalidConfiguration, what, endpoint: endpoint) }
        }
        try check(!configuration.host.isEmpty, "the host is empty")
        try check((1...65535).contains(configuration.port), "port \(configuration.port) is not in 1...65535")
        try check(configuration.connectionCount >= 1, "connectionCount must be at least 1")
        try check(configuration.maximumConcurrentStreamsPerConnection >= 1,
            "maximumConcurrentStreamsPerConnection must be at least 1")
        try check(configuration.maximumQueuedRequests >= 1, "maximumQueuedRequests must be at least 1")
        try check(configuration.maximumResponseBodyBytes >= 0, "maximumResponseBodyBytes must not be negative")
        try check(configuration.requestTimeout > .zero && configuration.connectTimeout > .zero,
            "timeouts must be positive")
        self.configuration = configuration
        self.group = group
        self.connectionSettings = settings
        self.tls = try TLSContext(configuration: configuration.tls, host: configuration.host, endpoint: endpoint)
        let bracketed = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        self.authority = configuration.port == 443 ? bracketed : "\(bracketed):\(configuration.port)"
        requestTimeoutNanoseconds = configuration.requestTimeout.nanosecondsClamped
        self.state = Mutex(State(waiters: BoundedQueue(capacity: configuration.maximumQueuedRequests)))
    }

    /// `host:port` of the server.
    public var endpoint: String { connectionSettings.endpoint }

    /// Sends `request` and returns the complete response.
    ///
    /// Empty `scheme` and `authority` are filled in with `https` and the pool's authority.
    /// - Parameter timeout: overrides the configuration's `requestTimeout` (queueing included).
    /// - Throws: `HTTP2ClientError` (see its codes), or `CancellationError` when the task is cancelled
    ///   (an open stream is then reset).
    ///
    /// Runs on the caller's executor (`nonisolated(nonsending)`), so a task on an event loop's executor
    /// submits without a hop.
    nonisolated(nonsending)
    public func send(_ request: consuming HTTP2Request, timeout: Duration? = nil) async throws -> HTTP2Response {
        try Task.checkCancellation()
        if !request.hasSchemeAndAuthority {
            if request.scheme.isEmpty { request.scheme = "https" }
            if request.authority.isEmpty { request.authority = authority }
        }
        let timeoutNanoseconds = timeout?.nanosecondsClamped ?? requestTimeoutNanoseconds
        let ticket = HTTP2StreamTicket(request: consume request,
            deadline: MonotonicClock.now() &+ timeoutNanoseconds, timeoutNanoseconds: timeoutNanoseconds)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<HTTP2Response, any Error>) in
                if ticket.install(continuation) { enqueue(ticket) }
            }
        } onCancel: {
            cancel(ticket)
        }
    }

    /// Sends `request` and calls `onResponse` exactly once with the complete response or the error: on
    /// the connection's loop thread, or before `start` returns when the request fails at once (the pool
    /// is shut down, its queue is full).
    ///
    /// For callers that fan out many requests and wait once for all of them: no continuation, task or
    /// cancellation handler per request. Not cancellable: the request ends with its response, its
    /// timeout (`timeout`, else the configuration's `requestTimeout`, queueing included) or the pool's
    /// shutdown. Empty `scheme` and `authority` are filled in as `send` does.
    public func start(_ request: consuming HTTP2Request, timeout: Duration? = nil,
                      onResponse: @escaping @Sendable (Result<HTTP2Response, any Error>) -> Void) {
        if !request.hasSchemeAndAuthority {
            if request.scheme.isEmpty { request.scheme = "https" }
            if request.authority.isEmpty { request.authority = authority }
        }
        let timeoutNanoseconds = timeout?.nanosecondsClamped ?? requestTimeoutNanoseconds
        enqueue(HTTP2StreamTicket(request: consume request, deadline: MonotonicClock.now() &+ timeoutNanoseconds,
            timeoutNanoseconds: timeoutNanoseconds, onFinish: onResponse))
    }

    /// Stops sending new streams on the connection with this id (from `HTTP2Response.connectionID`);
    /// its open streams finish, and later requests go to other or new connections. Use it when the
    /// server says the connection is no good (APNs: IdleTimeout, Shutdown, UnrelatedKeyIdInToken).
    /// Unknown or already retired ids are ignored.
    public func retireConnection(id: UInt64, reason: String = "retired by the client") {
        // Out of the dispatch set at once, so that a retry sent right after this call opens or uses another
        // connection; the connection itself stops taking streams on its loop.
        let connection = state.withLock { state -> HTTP2Connection? in
            guard let index = state.entries.firstIndex(where: { $0.connection.id == id }) else { return nil }
            let entry = state.entries.remove(at: index)
            state.draining.append(entry)
            return entry.connection
        }
        guard let connection else { return }
        connection.loop.execute { connection.retireOnRequest(reason) }
    }

    /// A snapshot of connection and stream counts.
    public var statistics: Statistics {
        state.withLock { state in
            Statistics(
                readyConnections: state.entries.filter(\.isReady).count,
                connectingConnections: state.entries.filter { !$0.isReady }.count,
                drainingConnections: state.draining.count,
                streamsInFlight: (state.entries + state.draining).reduce(0) { $0 + $1.inFlight },
                streamCapacity: state.entries.reduce(0) { $0 + ($1.isReady ? $1.limit : 0) },
                queuedRequests: state.waiters.count,
                connectFailures: state.connectFailures,
                connectionsOpened: state.connectionsOpened)
        }
    }

    /// Stops taking requests (queued ones fail with `.poolShutDown`), lets open streams finish for up to
    /// `gracePeriod`, then closes every connection. Returns when all are closed.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        var actions = Actions()
        let connections = state.withLock { state -> [HTTP2Connection] in
            state.isShutDown = true
            while let waiter = state.waiters.popFirst() {
                waiter.isWaiting = false
                actions.failures.append((waiter, error(.poolShutDown, "the pool was shut down")))
            }
            return (state.entries + state.draining).map(\.connection)
        }
        perform(actions)
        let forceAt = MonotonicClock.now() &+ gracePeriod.nanosecondsClamped
        for connection in connections {
            connection.loop.execute { connection.closeGracefully() }
            connection.loop.schedule(at: forceAt) {
                connection.close(HTTP2ClientError(.connectionClosed,
                    "the pool shut down before the response arrived", endpoint: connection.endpoint))
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.entries.isEmpty && state.draining.isEmpty { return true }
                state.shutdownWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: Dispatch

    private func enqueue(_ ticket: HTTP2StreamTicket) {
        // The common case, without building an action list: a ready connection has a free stream.
        let direct = state.withLock { state -> HTTP2Connection? in
            let grown = state.entries.count == configuration.connectionCount || state.consecutiveFailures > 0
            guard !state.isShutDown, grown, let index = state.leastLoadedReady()
            else { return nil }
            state.entries[index].inFlight += 1
            let connection = state.entries[index].connection
            ticket.dispatchedTo = connection
            return connection
        }
        if let direct {
            direct.loop.enqueue(.submit(direct, ticket))
            return
        }
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            if state.isShutDown {
                actions.failures.append((ticket, error(.poolShutDown, "the pool is shut down")))
                return
            }
            openConnectionsIfNeeded(&state, now: now, actions: &actions)
            if let index = state.leastLoadedReady() {
                state.entries[index].inFlight += 1
                ticket.dispatchedTo = state.entries[index].connection
                actions.dispatches.append((state.entries[index].connection, ticket))
                return
            }
            if state.entries.isEmpty {
                actions.failures.append((ticket, unavailableError(state, now: now)))
                return
            }
            guard state.waiters.append(ticket) else {
                actions.failures.append((ticket, error(.poolSaturated,
                    "every stream is busy and \(state.waiters.capacity) requests are already waiting; "
                        + "send more slowly or raise connectionCount / maximumQueuedRequests")))
                return
            }
            ticket.isWaiting = true
            if !state.expiryScheduled {
                state.expiryScheduled = true
                actions.scheduleExpiry = true
            }
        }
        perform(actions)
    }

    private func cancel(_ ticket: HTTP2StreamTicket) {
        enum Where { case removed, dispatched(HTTP2Connection), nowhere }
        let place = state.withLock { state -> Where in
            if ticket.isWaiting {
                ticket.isWaiting = false
                _ = state.waiters.removeAll { $0 === ticket }
                return .removed
            }
            if let connection = ticket.dispatchedTo { return .dispatched(connection) }
            return .nowhere
        }
        switch place {
        case .removed, .nowhere:
            ticket.finish(.failure(CancellationError()))
        case .dispatched(let connection):
            connection.loop.enqueue(.cancel(connection, ticket))
        }
    }

    /// Opens connections up to `connectionCount`; after a failure only one attempt at a time, and not
    /// before the back-off has passed.
    private func openConnectionsIfNeeded(_ state: inout State, now: UInt64, actions: inout Actions) {
        guard !state.isShutDown else { return }
        while state.entries.count < configuration.connectionCount, now >= state.backoffUntil {
            if state.consecutiveFailures > 0, state.entries.contains(where: { !$0.isReady }) { return }
            let connection = HTTP2Connection(loop: group.next(), settings: connectionSettings, tls: tls,
                delegate: self)
            state.entries.append(Entry(connection: connection))
            state.connectionsOpened += 1
            actions.starts.append(connection)
            if state.consecutiveFailures > 0 { return }
        }
    }

    /// Hands queued requests to ready connections with free streams, oldest first.
    private func dispatchWaiters(_ state: inout State, actions: inout Actions) {
        while let first = state.waiters.first {
            if first.isFinished {
                _ = state.waiters.popFirst()
                first.isWaiting = false
                continue
            }
            guard let index = state.leastLoadedReady() else { return }
            _ = state.waiters.popFirst()
            first.isWaiting = false
            state.entries[index].inFlight += 1
            first.dispatchedTo = state.entries[index].connection
            actions.dispatches.append((state.entries[index].connection, first))
        }
    }

    private func unavailableError(_ state: State, now: UInt64) -> HTTP2ClientError {
        let wait = state.backoffUntil > now ? Duration.nanoseconds(Int64(state.backoffUntil - now)) : Duration.zero
        let last = state.lastConnectError?.message ?? "no connection"
        return HTTP2ClientError(.connectFailed, "no connection to the server (last attempt: \(last)); "
            + "next attempt in \(Int((wait.seconds * 1000).rounded())) ms", endpoint: endpoint, retryAfter: wait)
    }

    private func error(_ code: HTTP2ClientError.Code, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(code, message, endpoint: endpoint)
    }

    private func perform(_ actions: Actions) {
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
        for waiter in actions.shutdownWaiters { waiter.resume() }
    }

    private func expireWaiters() {
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            let expired = state.waiters.removeAll { $0.isFinished || $0.deadline <= now }
            for ticket in expired where !ticket.isFinished {
                ticket.isWaiting = false
                // Never sent: the worker's own pool was full, so the caller may send it again uncounted.
                actions.failures.append((ticket, error(.poolSaturated,
                    "no free stream within \(formatNanoseconds(ticket.timeoutNanoseconds)) "
                        + "(\(state.entries.filter(\.isReady).count) ready connections, all streams busy or "
                        + "still connecting); the request was not sent")))
            }
            if state.waiters.isEmpty {
                state.expiryScheduled = false
            } else {
                actions.scheduleExpiry = true
            }
        }
        perform(actions)
    }
}

// MARK: - Connection events (on the connection's loop thread)

extension ConnectionPool: HTTP2ConnectionDelegate {
    func connectionDidBecomeReady(_ connection: HTTP2Connection, streamLimit: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            state.entries[index].isReady = true
            state.entries[index].limit = streamLimit
            state.consecutiveFailures = 0
            state.backoffUntil = 0
            state.lastConnectError = nil
            dispatchWaiters(&state, actions: &actions)
        }
        perform(actions)
    }

    func connection(_ connection: HTTP2Connection, streamLimitChangedTo limit: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            state.entries[index].limit = limit
            dispatchWaiters(&state, actions: &actions)
        }
        perform(actions)
    }

    func connectionIsGoingAway(_ connection: HTTP2Connection) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            state.draining.append(state.entries.remove(at: index))
            if !state.waiters.isEmpty {
                openConnectionsIfNeeded(&state, now: MonotonicClock.now(), actions: &actions)
                dispatchWaiters(&state, actions: &actions)
            }
        }
        perform(actions)
    }

    func connection(_ connection: HTTP2Connection, didFinishStreams count: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else {
                if let draining = state.draining.firstIndex(where: { $0.connection === connection }) {
                    state.draining[draining].inFlight -= count
                }
                return
            }
            state.entries[index].inFlight -= count
            if !state.waiters.isEmpty { dispatchWaiters(&state, actions: &actions) }
        }
        perform(actions)
    }

    func connectionDidClose(_ connection: HTTP2Connection, error closeError: HTTP2ClientError?, wasReady: Bool) {
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            if let index = state.index(of: connection) {
                state.entries.remove(at: index)
            } else if let index = state.draining.firstIndex(where: { $0.connection === connection }) {
                state.draining.remove(at: index)
            }
            if state.isShutDown {
                if state.entries.isEmpty && state.draining.isEmpty {
                    actions.shutdownWaiters = state.shutdownWaiters
                    state.shutdownWaiters = []
                }
                return
            }
            if let closeError, !wasReady {
                state.consecutiveFailures += 1
                state.connectFailures += 1
                state.lastConnectError = closeError
                let delay = configuration.reconnectBackoff.delay(afterFailures: state.consecutiveFailures)
                state.backoffUntil = now &+ delay.nanosecondsClamped
                if state.entries.isEmpty {
                    // Nobody left to serve the queue: tell waiters now rather than at their deadline.
                    var failure = closeError
                    failure.retryAfter = delay
                    while let waiter = state.waiters.popFirst() {
                        waiter.isWaiting = false
                        actions.failures.append((waiter, failure))
                    }
                }
            } else if closeError != nil || !state.waiters.isEmpty {
                // A working connection died (or a clean close left work queued): replace it now.
                openConnectionsIfNeeded(&state, now: now, actions: &actions)
            }
        }
        perform(actions)
    }
}
