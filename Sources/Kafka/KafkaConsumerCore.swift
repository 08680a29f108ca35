// The state a consumer's poll thread shares with its async side, behind one lock: the bounded
// hand-off of received records, pause bookkeeping (the owner's pauses and the hand-off's own), the
// assignment, the status (brokers, membership) and the lifecycle with its deadlines. The facets are
// in the KafkaConsumerCore+ files; the lifecycle is here.

import Dispatch
import Platform
import Synchronization

final class ConsumerCore: Sendable {
    enum Lifecycle { case running, closing, closed }

    struct State {
        var lifecycle = Lifecycle.running
        /// The consumer's handle, set once right after it is created.
        var handle: RDKafkaHandle?
        var buffer = MessageQueue()
        var waiters: [(id: UInt64, continuation: CheckedContinuation<KafkaConsumerMessage?, any Error>)] = []
        var nextWaiterID: UInt64 = 0
        /// A fatal error: every later `next()` throws it.
        var failure: KafkaError?
        /// Changed only through `addAssignment` and `removeAssignment`, like `assigned`.
        var assignment: Set<KafkaTopicPartition> = []
        /// Each assigned partition's assignment number, whether it has fetched since, and its held-back first
        /// record. Its keys are `assignment`. Partitions come and go only through `addAssignment` and
        /// `removeAssignment`, which keep `lastDropAfterAssignment` right.
        var assigned: [KafkaTopicPartition: AssignedPartition] = [:]
        /// Assignments made so far: the last one's number.
        var assignmentsMade: UInt64 = 0
        /// Paused by the owner through `KafkaConsumer.pause`.
        var pausedByOwner: Set<KafkaTopicPartition> = []
        /// Paused by the hand-off because it was full (and not also paused by the owner).
        var pausedForBuffer: Set<KafkaTopicPartition> = []
        /// Paused in librdkafka now: those of the two sets above that have fetched since their assignment
        /// (see `applyPauses`).
        var pausedInLibrdkafka: Set<KafkaTopicPartition> = []
        /// Whether the hand-off stayed full and fetching is paused until it drains to the threshold.
        var isThrottled = false
        /// Whether the poll thread waits on `roomAvailable`.
        var pollerIsWaiting = false
        /// `close()` callers; each is resumed with true once closed, or with false by its deadline.
        var closeWaiters: [ResumeOnce<Bool>] = []
        var closeError: KafkaError?
        /// When a bounded `close(deadline:)` stops waiting: waits of the closing poll thread end by then.
        var closeDeadline: ContinuousClock.Instant?
        /// No revocation waits past this (set when a bounded shutdown starts; see `limitRevocations`).
        var revocationLimit: ContinuousClock.Instant?
        /// What the poll thread is doing while it closes, for the message of an abandoned close.
        var closingStage = "stopping the poll loop"
        var status = KafkaConsumerStatus.initial
        /// librdkafka's last connection error: the cause shown once no broker answers.
        var lastConnectionError: String?
        /// Whether `subscribe` succeeded, and whether the group ever handed this member an assignment
        /// (an empty one counts): see `mustAwaitFirstAssignment`.
        var subscribed = false
        var everAssigned = false
    }

    let state = Mutex(State())
    /// Signalled when a reader makes room while the poll thread waits for it.
    let roomAvailable = DispatchSemaphore(value: 0)
    let capacity: Int
    let resumeThreshold: Int
    let stallTimeout: Duration
    let rebalanceDeadline: Duration
    let rebalanceHandler: (@Sendable (KafkaRebalanceEvent) async -> Void)?
    let eventHandler: KafkaEventHandler?
    let statusHandler: KafkaConsumerStatusHandler?
    /// Whether the owner asked for statistics events (the consumer reads them either way).
    let forwardsStatistics: Bool
    let usesCooperativeSticky: Bool
    /// See ``KafkaConsumerConfiguration/strandedPartitionThreshold``; nil: no watch.
    let strandedPartitionThreshold: Duration?
    let promptCommits: PromptCommits?
    /// Partitions whose idle fetching the poll thread restarted (`StalledFetchRestarter`), for tests.
    let fetchRestarts = Atomic<Int>(0)
    /// Restarts of partitions the stranded-partition watch found (`StrandedPartitionWatch`), and its checks.
    let strandedRestarts = Atomic<Int>(0)
    let strandedChecks = Atomic<Int>(0)
    /// The watch's findings and restarts waiting for the poll thread, oldest first (`offerStranded`,
    /// `takeOfferedStranded`), and whether any waits (read by the poll thread after every poll, without the lock).
    let strandedOffers = Mutex<[(stranded: Set<KafkaTopicPartition>?, restarting: [StrandedPartition])]>([])
    let strandedOffered = Atomic<Bool>(false)
    /// Rebalance callbacks entered plus those left (odd while the poll thread serves one): the watch does not
    /// count time the poll thread spent there, when it hands over no record of any partition.
    let rebalanceCallbackEdges = Atomic<UInt64>(0)
    /// Ends the watch's wait early at close.
    let strandedWatchWake = DispatchSemaphore(value: 0)
    /// Pause and resume requests made to librdkafka so far (`setPaused`): each is an op with a version
    /// barrier, like the restarter's seek, which must not overtake one that has not run yet.
    let pauseChanges = Atomic<UInt64>(0)
    /// `state.lifecycle == .running`, readable without the lock: the poll thread asks before every poll.
    let running = Atomic<Bool>(true)
    /// The number of the latest assignment made before a partition was last dropped from `state.assigned`
    /// (by `removeAssignment`, or replaced by `addAssignment`); set under the lock. A record whose assignment
    /// number is above it was assigned after every drop so far, so it is current without a look at the state:
    /// `isCurrent` is asked for every record, on the reader's thread, and the lock it took there was
    /// contended by the poll thread's (figures: docs/performance.md).
    let lastDropAfterAssignment = Atomic<UInt64>(0)

    init(
        capacity: Int, stallTimeout: Duration, rebalanceDeadline: Duration,
        rebalanceHandler: (@Sendable (KafkaRebalanceEvent) async -> Void)?, eventHandler: KafkaEventHandler?,
        statusHandler: KafkaConsumerStatusHandler? = nil, forwardsStatistics: Bool = true,
        usesCooperativeSticky: Bool = false, promptCommits: PromptCommits? = nil,
        strandedPartitionThreshold: Duration? = nil
    ) {
        self.strandedPartitionThreshold = strandedPartitionThreshold
        self.usesCooperativeSticky = usesCooperativeSticky
        self.promptCommits = promptCommits
        self.statusHandler = statusHandler
        self.forwardsStatistics = forwardsStatistics
        self.capacity = max(1, capacity)
        self.resumeThreshold = max(0, self.capacity / 2)
        self.stallTimeout = stallTimeout
        self.rebalanceDeadline = rebalanceDeadline
        self.rebalanceHandler = rebalanceHandler
        self.eventHandler = eventHandler
    }

    var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Whether `partition` is still assigned under `assignment` (see ``KafkaConsumer/isCurrent(_:assignment:)``).
    func isCurrent(_ partition: KafkaTopicPartition, assignment: UInt64) -> Bool {
        if assignment > lastDropAfterAssignment.load(ordering: .acquiring) { return true }
        return state.withLock { $0.assigned[partition]?.number == assignment }
    }

    /// Assigns `partitions` under a new number, above every earlier assignment's.
    func addAssignment(_ partitions: [KafkaTopicPartition], in state: inout State) {
        // A partition assigned again while assigned (never expected) replaces its assignment: a drop too.
        if partitions.contains(where: { state.assigned[$0] != nil }) { noteDrop(state) }
        state.assignment.formUnion(partitions)
        state.assignmentsMade += 1
        for partition in partitions { state.assigned[partition] = AssignedPartition(number: state.assignmentsMade) }
    }

    /// Takes `partitions` out of the assignment, or every partition with nil.
    func removeAssignment(_ partitions: Set<KafkaTopicPartition>?, in state: inout State) {
        noteDrop(state)
        guard let partitions else {
            state.assignment = []
            state.assigned = [:]
            return
        }
        state.assignment.subtract(partitions)
        for partition in partitions { state.assigned[partition] = nil }
    }

    /// Records of the assignments made so far are checked against the state from now on.
    private func noteDrop(_ state: borrowing State) {
        lastDropAfterAssignment.store(state.assignmentsMade, ordering: .releasing)
    }
    /// The assigned partitions: each one's assignment number, and whether it has handed over a record since.
    var assignedPartitions: [KafkaTopicPartition: (assignment: UInt64, hasFetched: Bool)] {
        state.withLock { state in state.assigned.mapValues { ($0.number, $0.hasFetched) } }
    }

    /// The partitions paused now (by the owner or by the hand-off), and a count that moves with every
    /// assignment and every pause or resume request.
    var pausesAndChanges: (paused: Set<KafkaTopicPartition>, changes: UInt64) {
        state.withLock {
            ($0.pausedByOwner.union($0.pausedForBuffer), $0.assignmentsMade &+ pauseChanges.load(ordering: .relaxed))
        }
    }

    /// Whether closing now would hit librdkafka 2.0.2's cooperative-sticky destroy bug: a member that
    /// joined but never got its first assignment has no assignor state, and destroying the handle then
    /// aborts the process (assertion `assignor_state` in the sticky assignor's state destructor,
    /// librdkafka issue 4312, fixed in 2.3.0). The poll thread serves the group a little longer first,
    /// only with a librdkafka loaded at run time that has the bug.
    var mustAwaitFirstAssignment: Bool {
        usesCooperativeSticky && Self.destroyAbortsBeforeFirstAssignment
            && state.withLock { $0.subscribed && !$0.everAssigned }
    }

    static let destroyAbortsBeforeFirstAssignment = RDKafkaVersion.loaded.abortsDestroyingBeforeFirstAssignment

    // MARK: Lifecycle

    /// Asks the poll thread to close; with a deadline, its waits while closing end by then (the
    /// earliest deadline asked for wins).
    func requestClose(deadline: ContinuousClock.Instant? = nil) {
        promptCommits?.stop()
        state.withLock { state in
            if state.lifecycle == .running {
                state.lifecycle = .closing
                running.store(false, ordering: .releasing)
                strandedWatchWake.signal()
            }
            if let deadline { state.closeDeadline = min(state.closeDeadline ?? deadline, deadline) }
            wakePoller(&state)
        }
    }

    /// Bounds revocations from now on, and one under way, by `deadline`.
    func limitRevocations(until deadline: ContinuousClock.Instant) {
        state.withLock { state in state.revocationLimit = min(state.revocationLimit ?? deadline, deadline) }
    }

    /// The earliest of the close deadline and the revocation limit, if either is set.
    var waitLimit: ContinuousClock.Instant? {
        state.withLock { state in
            switch (state.closeDeadline, state.revocationLimit) {
            case (let close?, let revocation?): min(close, revocation)
            case (let close, let revocation): close ?? revocation
            }
        }
    }

    func setClosingStage(_ stage: String) {
        state.withLock { $0.closingStage = stage }
    }

    func fail(_ error: KafkaError) {
        state.withLock { state in
            state.failure = error
            for waiter in state.waiters { waiter.continuation.resume(throwing: error) }
            state.waiters = []
        }
    }

    /// Marks the consumer closed and wakes every reader and `close()` caller.
    func finishClosing(error: KafkaError?) {
        noteMembership(false, cause: "the consumer closed")
        state.withLock { state in
            state.lifecycle = .closed
            running.store(false, ordering: .releasing)
            state.closeError = error
            state.buffer.removeAll { _ in true }
            removeAssignment(nil, in: &state)
            state.status.partitionsAssigned = 0
            for waiter in state.waiters { waiter.continuation.resume(returning: nil) }
            state.waiters = []
            for waiter in state.closeWaiters { waiter.resume(returning: true) }
            state.closeWaiters = []
        }
    }
}

/// An assigned partition, as the consumer tracks it.
struct AssignedPartition {
    /// Its assignment's number (see `KafkaConsumerMessage.assignment`).
    let number: UInt64
    /// Whether it has handed over a record since: librdkafka has run the assignment's fetch start, so a
    /// pause or resume can no longer overtake it (see `applyPauses`).
    var hasFetched = false
    /// Its first record, if it was paused before it fetched: handed out when it is resumed (`applyPauses`).
    var heldFirstRecord: KafkaConsumerMessage?
}

extension ConsumerCore.State {
    /// Whether the owner or the hand-off holds `partition` paused.
    func isPaused(_ partition: KafkaTopicPartition) -> Bool {
        pausedByOwner.contains(partition) || pausedForBuffer.contains(partition)
    }
}
