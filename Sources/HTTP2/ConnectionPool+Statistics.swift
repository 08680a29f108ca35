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
        /// Connections the pool keeps now: `connectionCount`, more while it has grown under load.
        public var targetConnections: Int
        /// The most connections the pool may grow to (`connectionCeiling`).
        public var connectionCeiling: Int
        /// Requests waiting for a free stream.
        public var queuedRequests: Int
        /// Our cap on streams per connection (`maximumConcurrentStreamsPerConnection`).
        public var streamsPerConnectionCap: Int
        /// Failed connection attempts since the pool was created.
        public var connectFailures: Int
        /// Connections opened since the pool was created.
        public var connectionsOpened: Int
    }

    /// A snapshot of connection and stream counts.
    ///
    /// `streamCapacityWithGrowth` is what a caller sizing its concurrency should follow.
    public var statistics: Statistics {
        state.withLock { state in
            Statistics(
                readyConnections: state.entries.filter(\.isReady).count,
                connectingConnections: state.entries.filter { !$0.isReady }.count,
                drainingConnections: state.draining.count,
                streamsInFlight: (state.entries + state.draining).reduce(0) { $0 + $1.inFlight },
                streamCapacity: state.entries.reduce(0) { $0 + ($1.isReady ? $1.limit : 0) },
                targetConnections: state.targetConnections,
                connectionCeiling: configuration.connectionCeiling,
                queuedRequests: state.waiters.count,
                streamsPerConnectionCap: configuration.maximumConcurrentStreamsPerConnection,
                connectFailures: state.connectFailures,
                connectionsOpened: state.connectionsOpened)
        }
    }
}

extension ConnectionPool.Statistics {
    /// Streams the pool can carry once the connections it keeps are ready, plus one more connection while
    /// it may still grow (it grows only while requests wait, so a caller that never offers more than the
    /// current capacity would never let it grow). Connections not ready yet count at the ready ones'
    /// average limit, or at our cap when none is ready. 0 for a pool that never opened a connection.
    public var streamCapacityWithGrowth: Int {
        guard connectionsOpened > 0 else { return 0 }
        let perConnection = readyConnections > 0 ? streamCapacity / readyConnections : streamsPerConnectionCap
        let connections = min(connectionCeiling, targetConnections + 1)
        return streamCapacity + max(0, connections - readyConnections) * perConnection
    }
}
