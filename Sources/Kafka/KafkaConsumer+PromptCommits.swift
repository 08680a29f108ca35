// Commits stored offsets soon after they advance, on a thread of the consumer's own, so that what a crash
// leaves to redo is the unfinished records plus a short, configured window (KafkaConsumerConfiguration's
// commitInterval and commitAfterRecords), whatever librdkafka's auto-commit timer is doing.

import Dispatch
import Synchronization

/// Commits the stored offsets (asynchronously: the call only queues the commit) once per `interval` in
/// which some were stored, and at once when the stored offsets advanced by `afterRecords` since the last
/// commit, until the consumer starts closing.
///
/// Why not librdkafka's auto-commit alone: its timer ticks on its own schedule (and skips ticks while the
/// group is not steady), while a restarted consumer works through the backlog its outage left at several
/// times the input rate; a kill a second after such a restart found ~2,000 finished records uncommitted
/// with a 1 s timer. Counting records bounds the window whatever the rate. An explicit commit is sent in
/// any group state; one refused during a rebalance is carried by the next.
final class PromptCommits: Sendable {
    let interval: Duration
    let afterRecords: Int?

    private struct State {
        /// The last offset stored per partition, to count how far offsets advanced.
        var stored: [KafkaTopicPartition: Int64] = [:]
        /// Records the stored offsets advanced by since the last commit was queued.
        var advanced = 0
        /// Whether an offset was stored since the last commit was queued.
        var pending = false
        /// Whether the commit thread was woken for `afterRecords` and has not committed yet.
        var woken = false
    }

    private let state = Mutex(State())
    private let stopped = Atomic<Bool>(false)
    /// Ends the commit thread's wait early: for a commit that cannot wait for the tick, and at close.
    private let wake = DispatchSemaphore(value: 0)
    /// Commits queued so far (for tests and diagnostics).
    private let queued = Atomic<Int>(0)

    init(interval: Duration, afterRecords: Int?) {
        self.interval = max(interval, .milliseconds(1))
        self.afterRecords = afterRecords.map { max(1, $0) }
    }

    /// Notes stored next-to-read offsets: the next tick commits them, or a commit starts at once when they
    /// advanced by `afterRecords` since the last. Non-blocking (one short lock); any thread.
    func noteStored(_ nextOffsets: [KafkaTopicPartition: Int64]) {
        let commitNow = state.withLock { state -> Bool in
            for (partition, offset) in nextOffsets {
                if let previous = state.stored[partition] {
                    if offset > previous { state.advanced += Int(clamping: offset - previous) }
                } else {
                    state.advanced += 1
                }
                state.stored[partition] = offset
            }
            state.pending = true
            guard let afterRecords, state.advanced >= afterRecords, !state.woken else { return false }
            state.woken = true
            return true
        }
        if commitNow { wake.signal() }
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
            if stopped.load(ordering: .acquiring) { return }
            let due = state.withLock { state -> Bool in
                defer {
                    state.pending = false
                    state.advanced = 0
                    state.woken = false
                }
                return state.pending
            }
            guard due else { continue }
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
