// Shutdown: stop taking records, wait a bounded time for those in flight, flush the sink, close the source.

import Platform

extension Pipeline {
    /// Stops taking records, waits up to `timeout` seconds for in-flight ones, flushes the sink within
    /// what is left of it and closes the source (which commits what was stored). Returns the records
    /// left unfinished; `leftBehind` is told, once the wait is over, how many each partition holds.
    @discardableResult
    public func drain(
        timeout: Double, leftBehind: (@Sendable (_ unfinished: [TopicPartition: Int]) -> Void)? = nil
    ) async -> Int {
        state.withLock { $0.receiving = false }
        source.stopReceiving()
        let deadline = MonotonicClock.seconds() + timeout
        // A transactional sink that stopped for good commits nothing more: waiting would only delay the exit.
        while MonotonicClock.seconds() < deadline, recordsInFlight > 0, transactions?.failure == nil {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let (left, unfinished) = state.withLock { state -> (Int, [TopicPartition: Int]) in
            var unfinished: [TopicPartition: Int] = [:]
            for partition in state.assigned where state.tracker.unfinished(partition) > 0 {
                unfinished[partition] = state.tracker.unfinished(partition)
            }
            return (state.flow.inFlight, unfinished)
        }
        leftBehind?(unfinished)
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
