// Where the work in flight is, read at any moment: for `bench pipeline`'s report and timeline.

extension WorkerRuntime {
    /// Every pool's connections open (ready or draining), streams in flight and requests waiting for a
    /// stream, summed: where a record in flight is (at APNs, or queued in front of it).
    public var apnsPoolTotals: (connectionsOpen: Int, streamsInFlight: Int, requestsQueued: Int) {
        transport.pools.reduce((0, 0, 0)) { sum, pool in
            let statistics = pool.statistics
            return (
                sum.0 + statistics.readyConnections + statistics.drainingConnections,
                sum.1 + statistics.streamsInFlight, sum.2 + statistics.queuedRequests
            )
        }
    }

    /// The APNs pools pushes go through (environment × credential in use).
    public var apnsPoolCount: Int { transport.pools.count }

    /// Result records Kafka has not acknowledged yet, those waiting to be sent again included: what
    /// `apns_worker_results_unacknowledged` shows.
    public var resultsUnacknowledged: Int { sink.unacknowledged }
}
