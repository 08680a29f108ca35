// Commits stored offsets soon after they advance, on a thread of the consumer's own, so that what a crash
// leaves to redo is the unfinished records plus a short, configured window (KafkaConsumerConfiguration's
// commitInterval), whatever librdkafka's auto-commit timer is doing.

import Dispatch
import Synchronization

/// Commits the stored offsets once per `interval` in which some were stored (asynchronously: the call only
/// queues the commit), until the consumer starts closing.
///
/// librdkafka's auto-commit timer does not commit while the group is not in its steady state, and the
/// coordinator may hold a member in a join for seconds after a restart (waiting for a dead member's
/// session to time out); a commit asked for explicitly is sent in any state, and one refused during a
/// rebalance is carried by the next.
final class PromptCommits: Sendable {
    let interval: Duration
    /// Whether an offset was stored since the last commit was queued.
    private let pending = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    /// Signalled to end the wait early when the consumer closes.
    private let wake = DispatchSemaphore(value: 0)
    /// Commits queued so far (for tests and diagnostics).
    private let queued = Atomic<Int>(0)

    init(interval: Duration) {
        self.interval = max(interval, .milliseconds(1))
    }

    /// Notes that offsets were stored: the next tick commits them. Non-blocking; any thread.
    func noteStored() {
        pending.store(true, ordering: .releasing)
    }

    /// Ends the loop at once (the consumer is closing; its close commits what is stored).
    func stop() {
        if !stopped.exchange(true, ordering: .acquiringAndReleasing) { wake.signal() }
    }

    var commitsQueued: Int { queued.load(ordering: .relaxed) }

    /// The loop, on its own thread: it holds `client` until the consumer closes.
    func run(client: RDKafkaClient) {
        let milliseconds = Int(clamping: interval.wholeMilliseconds)
        while !stopped.load(ordering: .acquiring) {
            _ = wake.wait(timeout: .now() + .milliseconds(milliseconds))
            guard !stopped.load(ordering: .acquiring), pending.exchange(false, ordering: .acquiringAndReleasing)
            else { continue }
            queued.add(1, ordering: .relaxed)
            // The commit's own failure comes later, as librdkafka's COMMITFAIL log line (see RDKafkaCallbacks);
            // only a commit that could not even be queued answers here.
            if let response = client.commitStoredOffsets(blocking: false) {
                client.callbacks.emit(
                    .error(KafkaError(.commit, "queueing a commit of stored offsets", response: response)))
            }
        }
    }
}
