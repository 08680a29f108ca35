// Shutdown: stop taking records, wait a bounded time for those in flight, flush the sink, close the source.

import Platform

extension Pipeline {
    /// Stops taking records, withdraws every push still waiting (for a pool that is down, a retry's
    /// delay, a paced device: waiting for those would only spend the drain), waits up to `timeout` seconds
    /// for the records in flight (those taken and not yet started start as usual), flushes the sink
    /// within what is left of it and closes the source (which commits what was stored). Returns the
    /// records left unfinished. What each partition holds still running at the wait's end and what it
    /// released unsent (both uncommitted) goes to the observer, once, as a `RecordsHandedOver` of cause
    /// `.shutdown`; `waitOver` is told when the wait is over, before the flush.
    @discardableResult
    public func drain(timeout: Double, waitOver: (@Sendable () -> Void)? = nil) async -> Int {
        let withdrawals = state.withLock { state in
            state.receiving = false
            defer { state.withdrawals = [:] }
            return Array(state.withdrawals.values)
        }
        for withdrawal in withdrawals { withdrawal.withdraw() }
        stopResizingWhilePaused()
        source.stopReceiving()
        let deadline = MonotonicClock.seconds() + timeout
        // A transactional sink that stopped for good commits nothing more: waiting would only delay the exit.
        while MonotonicClock.seconds() < deadline, recordsInFlight > 0, transactions?.failure == nil {
            try? await Task.sleep(for: .milliseconds(5))
        }
        // What has not started by now never does: it stays uncommitted for the group's next owner.
        for withdrawal in withdrawals { withdrawal.close() }
        let (left, running, withdrawn) = state.withLock {
            state -> (Int, [TopicPartition: Int], [TopicPartition: Int]) in
            var running: [TopicPartition: Int] = [:]
            var withdrawn: [TopicPartition: Int] = [:]
            for partition in state.assigned {
                let stillRunning = state.running(partition)
                let released = state.withdrawnUnfinished[partition, default: 0]
                if stillRunning > 0 { running[partition] = stillRunning }
                if released > 0 { withdrawn[partition] = released }
            }
            return (state.flow.inFlight + withdrawn.values.reduce(0, +), running, withdrawn)
        }
        waitOver?()
        let handOver = RecordsHandedOver(cause: .shutdown, releasedUnsent: withdrawn, leftRunning: running)
        if !handOver.isEmpty { observer?.recordsHandedOver(handOver) }
        // Within the drain's time only: what is still unfinished at its end stays uncommitted anyway.
        let remaining = max(0, deadline - MonotonicClock.seconds())
        if let transactions {
            _ = await transactions.commit(
                until: ContinuousClock.now.advanced(by: .milliseconds(Int64(remaining * 1000))))
        } else {
            _ = await sink.flush(timeout: remaining)
        }
        try? await source.close()
        // Idle lanes end now; a lane still busy with an abandoned record ends when that record does.
        lanes.stop()
        return left
    }
}
