// What a pool reports about itself, for metrics and tests: connections by phase, streams, queue, failures.

extension ConnectionPool {
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
}
