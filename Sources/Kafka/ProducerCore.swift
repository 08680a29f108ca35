// The producer's state shared by the tasks that send and the poll thread, behind one lock: the
// lifecycle, enqueues under way, pending flush and close requests, and the status bookkeeping.

import Synchronization

/// The producer's shared state behind one lock, and its poll loop.
final class ProducerCore: Sendable {
    enum Lifecycle { case running, closing, closed }

    struct State {
        var lifecycle = Lifecycle.running
        var fatal: KafkaError?
        /// Sends inside librdkafka's produce call right now; shutdown waits for them before purging.
        var activeEnqueues = 0
        var flushRequests: [(timeout: Duration, continuation: CheckedContinuation<KafkaError?, Never>)] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        /// Records enqueued (or being enqueued) without a delivery report yet.
        var unacknowledged = 0
        /// The last acknowledgement, or the enqueue that ended a time with nothing unacknowledged.
        var lastProgress = ContinuousClock.now
        /// Whether a delivery failed since the last acknowledgement: records failed by a delivery timeout
        /// and sent again have waited all along, so the enqueue of those does not restart the clock.
        var failedSinceProgress = false
        var isWaiting = false
        var lastConnectionError: String?
    }

    let state = Mutex(State())
    let waitThreshold: Duration
    let statusHandler: KafkaProducerStatusHandler?

    init(waitThreshold: Duration = .seconds(5), statusHandler: KafkaProducerStatusHandler? = nil) {
        self.waitThreshold = waitThreshold
        self.statusHandler = statusHandler
    }

    func beginEnqueue() throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            if let fatal = state.fatal { throw fatal }
            guard state.lifecycle == .running else {
                throw KafkaError(code: .closed, message: "the producer is closed")
            }
            state.activeEnqueues += 1
            // Counted before librdkafka holds it: its report may come before the produce call returns.
            if state.unacknowledged == 0, !state.failedSinceProgress { state.lastProgress = .now }
            state.unacknowledged += 1
        }
    }

    func endEnqueue(accepted: Bool) {
        state.withLock { state in
            state.activeEnqueues -= 1
            if !accepted { state.unacknowledged -= 1 }
        }
    }

    /// Asks the poll thread to flush; `continuation` gets nil, or the flush's error.
    func requestFlush(
        timeout: Duration, client: RDKafkaClient,
        continuation: CheckedContinuation<KafkaError?, Never>
    ) {
        let accepted = state.withLock { state in
            guard state.lifecycle == .running else { return false }
            state.flushRequests.append((timeout, continuation))
            return true
        }
        if accepted {
            client.wakePoll()
        } else {
            continuation.resume(returning: KafkaError(code: .closed, message: "the producer is closed"))
        }
    }

    func requestClose(client: RDKafkaClient, continuation: CheckedContinuation<Void, Never>? = nil) {
        let closed = state.withLock { state in
            if state.lifecycle == .closed { return true }
            state.lifecycle = .closing
            if let continuation { state.closeWaiters.append(continuation) }
            return false
        }
        if closed {
            continuation?.resume()
        } else {
            client.wakePoll()
        }
    }
}
