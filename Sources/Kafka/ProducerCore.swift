// The producer's state shared by the tasks that send and the poll thread, behind one lock: the
// lifecycle, enqueues under way, pending flush and close requests, and the status bookkeeping.

import Synchronization

/// The producer's shared state behind one lock, and its poll loop.
final class ProducerCore: Sendable {
    enum Lifecycle { case running, closing, closed }

    struct State {
        var lifecycle = Lifecycle.running
        var fatal: KafkaError?
        var flushRequests: [(timeout: Duration, continuation: CheckedContinuation<KafkaError?, Never>)] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        /// The last acknowledgement (as of the poll that served it), or the enqueue that ended a time with
        /// nothing unacknowledged.
        var lastProgress = ContinuousClock.now
        var lastConnectionError: String?
    }

    let state = Mutex(State())
    let waitThreshold: Duration
    let statusHandler: KafkaProducerStatusHandler?

    // Counted with atomics, not under `state`'s lock: the lock was taken twice per record by the sending
    // threads and once per delivery report by the poll thread, which contended for it (figures:
    // docs/performance.md).

    /// Whether sends are accepted: running, and no fatal error. Cleared (under the lock) before anything
    /// waits for `activeEnqueues` to drain.
    let accepting = Atomic<Bool>(true)
    /// Sends inside librdkafka's produce call right now; shutdown waits for them before purging.
    let activeEnqueues = Atomic<Int>(0)
    /// Records enqueued (or being enqueued) without a delivery report yet.
    let unacknowledged = Atomic<Int>(0)
    /// Whether the last delivery report was a failure: records failed by a delivery timeout and sent again
    /// have waited all along, so the enqueue of those does not restart the clock.
    let failedSinceProgress = Atomic<Bool>(false)
    /// Whether a delivery succeeded since the poll thread last looked (`checkWaiting`), which then reads the
    /// clock once for all of them.
    let acknowledgedSinceCheck = Atomic<Bool>(false)
    /// Whether records wait for the brokers (see ``KafkaProducerStatus``). Changed under `state`'s lock, with
    /// `lastProgress`; read without it by `noteDelivery`: while records wait, an acknowledgement ends the wait
    /// at once, not after the poll (or a shutdown's flush) that served it.
    let waitingForBrokers = Atomic<Bool>(false)

    init(waitThreshold: Duration = .seconds(5), statusHandler: KafkaProducerStatusHandler? = nil) {
        self.waitThreshold = waitThreshold
        self.statusHandler = statusHandler
    }

    func beginEnqueue() throws(KafkaError) {
        // Counted before the check, as shutdown stops accepting before it waits for the count: one of the
        // two sees the other.
        activeEnqueues.add(1, ordering: .sequentiallyConsistent)
        guard accepting.load(ordering: .sequentiallyConsistent) else {
            activeEnqueues.subtract(1, ordering: .sequentiallyConsistent)
            throw state.withLock { $0.fatal } ?? KafkaError(code: .closed, message: "the producer is closed")
        }
        // Counted before librdkafka holds it: its report may come before the produce call returns.
        if unacknowledged.wrappingAdd(1, ordering: .relaxed).oldValue == 0,
            !failedSinceProgress.load(ordering: .relaxed)
        {
            let now = ContinuousClock.now
            state.withLock { $0.lastProgress = now }
        }
    }

    func endEnqueue(accepted: Bool) {
        if !accepted { unacknowledged.subtract(1, ordering: .relaxed) }
        activeEnqueues.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// A fatal error: no send is accepted from now on.
    func noteFatal(_ error: KafkaError) {
        state.withLock { state in
            state.fatal = error
            accepting.store(false, ordering: .sequentiallyConsistent)
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
            accepting.store(false, ordering: .sequentiallyConsistent)
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
