// The state a consumer's poll thread shares with its async side, behind one lock: the bounded
// hand-off of received records, pause bookkeeping (the owner's pauses and the hand-off's own), the
// assignment, the status (brokers, membership) and the lifecycle with its deadlines. Also the
// rebalance callback, which runs on the poll thread.
internal import CRdKafka
import Dispatch
import Synchronization

/// Received records waiting to be handed out, oldest first.
struct MessageQueue {
    private var storage: [KafkaConsumerMessage] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ message: KafkaConsumerMessage) { storage.append(message) }

    mutating func popFirst() -> KafkaConsumerMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    mutating func removeAll(where shouldRemove: (KafkaConsumerMessage) -> Bool) {
        storage = storage[head...].filter { !shouldRemove($0) }
        head = 0
    }
}

final class ConsumerCore: Sendable {
    enum Lifecycle { case running, closing, closed }

    struct State {
        var lifecycle = Lifecycle.running
        /// The consumer's handle, set once right after it is created.
        var handle: OpaquePointer?
        var buffer = MessageQueue()
        var waiters: [(id: UInt64, continuation: CheckedContinuation<KafkaConsumerMessage?, any Error>)] = []
        var nextWaiterID: UInt64 = 0
        /// A fatal error: every later `next()` throws it.
        var failure: KafkaError?
        var assignment: Set<KafkaTopicPartition> = []
        /// Paused by the owner through `KafkaConsumer.pause`.
        var pausedByOwner: Set<KafkaTopicPartition> = []
        /// Paused by the hand-off because it was full (and not also paused by the owner).
        var pausedForBuffer: Set<KafkaTopicPartition> = []
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
    private let roomAvailable = DispatchSemaphore(value: 0)
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

    init(
        capacity: Int, stallTimeout: Duration, rebalanceDeadline: Duration,
        rebalanceHandler: (@Sendable (KafkaRebalanceEvent) async -> Void)?, eventHandler: KafkaEventHandler?,
        statusHandler: KafkaConsumerStatusHandler? = nil, forwardsStatistics: Bool = true,
        usesCooperativeSticky: Bool = false
    ) {
        self.usesCooperativeSticky = usesCooperativeSticky
        self.statusHandler = statusHandler
        self.forwardsStatistics = forwardsStatistics
        self.capacity = max(1, capacity)
        self.resumeThreshold = max(0, self.capacity / 2)
        self.stallTimeout = stallTimeout
        self.rebalanceDeadline = rebalanceDeadline
        self.rebalanceHandler = rebalanceHandler
        self.eventHandler = eventHandler
    }

    var isRunning: Bool { state.withLock { $0.lifecycle == .running } }

    /// Whether closing now would hit librdkafka 2.0.2's cooperative-sticky destroy bug: a member that
    /// joined but never got its first assignment has no assignor state, and `rd_kafka_destroy` then
    /// aborts the process (assertion `assignor_state` in rd_kafka_sticky_assignor_state_destroy,
    /// librdkafka issue 4312, fixed in 2.3.0). The poll thread serves the group a little longer first.
    var mustAwaitFirstAssignment: Bool {
        usesCooperativeSticky && state.withLock { $0.subscribed && !$0.everAssigned }
    }

    // MARK: Hand-off, poll-thread side

    /// Hands a received record to a waiting reader or buffers it.
    func deliver(_ message: KafkaConsumerMessage) {
        state.withLock { state in
            // A record of a partition revoked meanwhile is dropped: it is redelivered to its new owner.
            guard state.assignment.contains(message.topicPartition) else { return }
            if !state.waiters.isEmpty {
                state.waiters.removeFirst().continuation.resume(returning: message)
                return
            }
            state.buffer.append(message)
            if state.isThrottled {
                // Only a partition assigned while throttled can still deliver; pause it too.
                let partition = message.topicPartition
                if !state.pausedForBuffer.contains(partition), !state.pausedByOwner.contains(partition) {
                    Self.setPaused(true, [partition], handle: state.handle)
                    state.pausedForBuffer.insert(partition)
                }
            }
        }
    }

    /// Waits (on the poll thread) until the hand-off has room, at most `stallTimeout`.
    /// Returns `false` if it is still full: the caller then throttles so it can keep polling.
    func waitForRoom() -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(clamping: stallTimeout.wholeMilliseconds))
        while true {
            let hasRoom = state.withLock { state in
                if state.buffer.count < capacity || state.isThrottled || state.lifecycle != .running { return true }
                state.pollerIsWaiting = true
                return false
            }
            if hasRoom { return true }
            if roomAvailable.wait(timeout: deadline) == .timedOut {
                return state.withLock { state in
                    state.pollerIsWaiting = false
                    return state.buffer.count < capacity || state.lifecycle != .running
                }
            }
        }
    }

    /// Pauses every assigned partition the owner has not paused, because the hand-off stayed full.
    /// librdkafka drops what it prefetched for them and refetches from the next undelivered offset.
    func throttle() {
        state.withLock { state in
            guard !state.isThrottled, state.buffer.count >= capacity else { return }
            let toPause = state.assignment.subtracting(state.pausedByOwner)
            Self.setPaused(true, toPause, handle: state.handle)
            state.pausedForBuffer = toPause
            state.isThrottled = true
        }
    }

    /// Wakes the poll thread if it waits for room (called with the lock held).
    private func wakePoller(_ state: inout State) {
        guard state.pollerIsWaiting else { return }
        state.pollerIsWaiting = false
        roomAvailable.signal()
    }

    /// Asks the poll thread to close; with a deadline, its waits while closing end by then (the
    /// earliest deadline asked for wins).
    func requestClose(deadline: ContinuousClock.Instant? = nil) {
        state.withLock { state in
            if state.lifecycle == .running { state.lifecycle = .closing }
            if let deadline { state.closeDeadline = min(state.closeDeadline ?? deadline, deadline) }
            wakePoller(&state)
        }
    }

    /// Bounds revocations from now on, and one under way, by `deadline`.
    func limitRevocations(until deadline: ContinuousClock.Instant) {
        state.withLock { state in state.revocationLimit = min(state.revocationLimit ?? deadline, deadline) }
    }

    /// The earliest of the close deadline and the revocation limit, if either is set.
    private var waitLimit: ContinuousClock.Instant? {
        state.withLock { state in
            switch (state.closeDeadline, state.revocationLimit) {
            case let (close?, revocation?): min(close, revocation)
            case let (close, revocation): close ?? revocation
            }
        }
    }

    func setClosingStage(_ stage: String) {
        state.withLock { $0.closingStage = stage }
    }

    // MARK: Status

    /// Reads what librdkafka reports about its connections, then passes the event on.
    func observe(_ event: KafkaEvent) {
        switch event {
        case .error(let error):
            noteConnectionError(error)
            eventHandler?(event)
        case .statistics(let json):
            if let counts = BrokerStatistics.counts(in: json) { noteBrokers(up: counts.up, known: counts.known) }
            if forwardsStatistics { eventHandler?(event) }
        default:
            eventHandler?(event)
        }
    }

    private static let connectionErrors: Set<Int32> = Set([
        RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__RESOLVE, RD_KAFKA_RESP_ERR__SSL,
        RD_KAFKA_RESP_ERR__AUTHENTICATION, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
    ].map(\.rawValue))

    private func noteConnectionError(_ error: KafkaError) {
        guard let code = error.librdkafkaCode, Self.connectionErrors.contains(code) else { return }
        updateStatus { state in
            if code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN.rawValue {
                var cause = error.message
                if let last = state.lastConnectionError { cause += " (last connection error: \(last))" }
                state.status.brokersUp = 0
                state.status.brokersReachable = false
                state.status.brokersCause = cause
            } else {
                state.lastConnectionError = error.message
            }
        }
    }

    private func noteBrokers(up: Int, known: Int) {
        updateStatus { state in
            state.status.brokersUp = up
            state.status.brokersKnown = known
            if up > 0 {
                state.status.brokersReachable = true
                state.status.brokersCause = nil
                state.lastConnectionError = nil
            } else if known > 0, state.status.brokersReachable {
                state.status.brokersReachable = false
                state.status.brokersCause = state.lastConnectionError
                    ?? "no connection to any of the \(known) known brokers is up"
            }
        }
    }

    private func noteMembership(_ isMember: Bool, cause: String?) {
        updateStatus { state in
            state.status.isGroupMember = isMember
            state.status.membershipCause = isMember ? nil : cause
            state.status.partitionsAssigned = state.assignment.count
        }
    }

    /// Applies `change` under the lock and tells the status handler (outside it) if the status changed.
    /// Every caller runs on the poll thread, so changes reach the handler in order.
    private func updateStatus(_ change: (inout State) -> Void) {
        let changed = state.withLock { state -> KafkaConsumerStatusChange? in
            let previous = state.status
            change(&state)
            guard previous != state.status else { return nil }
            return KafkaConsumerStatusChange(previous: previous, current: state.status)
        }
        if let changed { statusHandler?(changed) }
    }

    var status: KafkaConsumerStatus { state.withLock { $0.status } }

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
            state.closeError = error
            state.buffer.removeAll { _ in true }
            state.assignment = []
            state.status.partitionsAssigned = 0
            for waiter in state.waiters { waiter.continuation.resume(returning: nil) }
            state.waiters = []
            for waiter in state.closeWaiters { waiter.resume(returning: true) }
            state.closeWaiters = []
        }
    }

    // MARK: Hand-off, async side

    func next() async throws -> KafkaConsumerMessage? {
        // A buffered record is taken without suspending (the common case under load): a continuation
        // and a cancellation handler per record cost a task switch each.
        let taken = state.withLock { state -> (KafkaConsumerMessage?, id: UInt64) in
            if let message = takeBuffered(&state) { return (message, 0) }
            state.nextWaiterID += 1
            return (nil, state.nextWaiterID)
        }
        if let message = taken.0 { return message }
        let id = taken.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { state in
                    if let message = takeBuffered(&state) {
                        continuation.resume(returning: message)
                    } else if let failure = state.failure {
                        continuation.resume(throwing: failure)
                    } else if state.lifecycle == .closed || Task.isCancelled {
                        continuation.resume(returning: nil)
                    } else {
                        state.waiters.append((id, continuation))
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    state.waiters.remove(at: index).continuation.resume(returning: nil)
                }
            }
        }
    }

    /// The oldest buffered record, if any; taking it may resume throttled partitions and wake the poller.
    private func takeBuffered(_ state: inout State) -> KafkaConsumerMessage? {
        guard let message = state.buffer.popFirst() else { return nil }
        resumeIfDrained(&state)
        if state.buffer.count < capacity { wakePoller(&state) }
        return message
    }

    /// Resumes the partitions the hand-off paused once it has drained below the threshold.
    private func resumeIfDrained(_ state: inout State) {
        guard state.isThrottled, state.buffer.count <= resumeThreshold else { return }
        Self.setPaused(false, state.pausedForBuffer.subtracting(state.pausedByOwner), handle: state.handle)
        state.pausedForBuffer = []
        state.isThrottled = false
    }

    var bufferedCount: Int { state.withLock { $0.buffer.count } }

    // MARK: Owner's pause and resume

    func pauseByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "pause")
            let fresh = Set(partitions).subtracting(state.pausedByOwner).subtracting(state.pausedForBuffer)
            state.pausedByOwner.formUnion(partitions)
            if let error = Self.setPaused(true, fresh, handle: state.handle) { throw error }
        }
    }

    func resumeByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "resume")
            let paused = Set(partitions).intersection(state.pausedByOwner)
            state.pausedByOwner.subtract(paused)
            // A partition the full hand-off also paused stays paused until the hand-off drains.
            if let error = Self.setPaused(false, paused.subtracting(state.pausedForBuffer), handle: state.handle) {
                throw error
            }
        }
    }

    private static func checkAssigned(
        _ partitions: [KafkaTopicPartition], in assignment: Set<KafkaTopicPartition>, action: String
    ) throws(KafkaError) {
        let unassigned = partitions.filter { !assignment.contains($0) }
        guard unassigned.isEmpty else {
            let list = unassigned.map(\.description).joined(separator: ", ")
            let owned = assignment.sorted().map(\.description).joined(separator: ", ")
            throw KafkaError(
                code: .partitionState,
                message: "cannot \(action) \(list): not assigned to this consumer (assigned: [\(owned)])"
            )
        }
    }

    @discardableResult
    private static func setPaused(
        _ pause: Bool, _ partitions: Set<KafkaTopicPartition>, handle: OpaquePointer?
    ) -> KafkaError? {
        guard let handle, !partitions.isEmpty else { return nil }
        let list = RDKafkaTopicPartitionList(partitions)
        let response = pause
            ? rd_kafka_pause_partitions(handle, list.pointer) : rd_kafka_resume_partitions(handle, list.pointer)
        let action = pause ? "pausing" : "resuming"
        if response != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(.partitionState, action, response: response) }
        return list.firstError(.partitionState, action)
    }

    // MARK: Rebalance (poll thread)

    func rebalance(_ rk: OpaquePointer, _ code: rd_kafka_resp_err_t,
                   _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        let partitions = RDKafkaTopicPartitionList.partitions(of: list)
        let cooperative = String(cString: rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE"
        switch code {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            state.withLock { $0.everAssigned = true }
            assign(rk, partitions, list, cooperative: cooperative)
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            revoke(rk, partitions, list, cooperative: cooperative)
        default:
            let error = KafkaError(.rebalance, "rebalance failed; dropping the assignment", response: code)
            eventHandler?(.error(error))
            dropFromState(partitions.isEmpty ? state.withLock { Array($0.assignment) } : partitions)
            noteMembership(false, cause: error.message)
            if cooperative {
                if let error = rd_kafka_incremental_unassign(rk, list) { report(.rebalance, "unassign", error) }
            } else {
                rd_kafka_assign(rk, nil)
            }
        }
    }

    private func assign(_ rk: OpaquePointer, _ partitions: [KafkaTopicPartition],
                        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, cooperative: Bool) {
        if cooperative {
            if let error = rd_kafka_incremental_assign(rk, list) { report(.rebalance, "incremental assign", error) }
        } else {
            let response = rd_kafka_assign(rk, list)
            if response != RD_KAFKA_RESP_ERR_NO_ERROR {
                eventHandler?(.error(KafkaError(.rebalance, "assign", response: response)))
            }
        }
        state.withLock { state in
            if !cooperative {
                state.assignment = []
                state.pausedByOwner = []
                state.pausedForBuffer = []
            }
            state.assignment.formUnion(partitions)
            let fresh = Set(partitions)
            if state.isThrottled {
                Self.setPaused(true, fresh, handle: rk)
                state.pausedForBuffer.formUnion(fresh)
            } else {
                // librdkafka keeps a partition's pause flag across a revoke and a new assignment, while
                // the pauses recorded here end at the revoke: make librdkafka agree, or a partition
                // paused before a rebalance would come back never to fetch again.
                Self.setPaused(false, fresh, handle: rk)
            }
        }
        noteMembership(true, cause: nil)
        // Runs after the assign so the owner may pause these partitions from its handler.
        if !partitions.isEmpty {
            let deadline = ContinuousClock.now.advanced(by: rebalanceDeadline)
            runRebalanceHandler(.assigned(partitions.sorted()), deadline: deadline)
        }
    }

    private func revoke(_ rk: OpaquePointer, _ partitions: [KafkaTopicPartition],
                        _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, cooperative: Bool) {
        let lost = rd_kafka_assignment_lost(rk) != 0
        // Stop handing out these partitions' records first; they stay unstored, so the next owner gets them.
        dropFromState(partitions)
        if lost {
            noteMembership(false, cause: "the assignment was lost: the group went on without this member "
                + "(its session timed out, or the coordinator could not be reached); rejoining")
        } else {
            noteMembership(true, cause: nil)
        }
        var deadline = ContinuousClock.now.advanced(by: rebalanceDeadline)
        // A bounded shutdown's drain deadline includes the revoke wait; it does not come on top of it.
        if let limit = waitLimit { deadline = min(deadline, limit) }
        if !partitions.isEmpty {
            setClosingStage("waiting for the rebalance handler to hand over revoked partitions")
            runRebalanceHandler(.revoked(KafkaRevocation(partitions: partitions.sorted(), deadline: deadline,
                                                         isLost: lost)), deadline: deadline)
        }
        if !lost {
            // Retrying is useful only where the group does not wait for this member (see below).
            var retryUntil = cooperative ? max(deadline, ContinuousClock.now.advanced(by: .seconds(1))) : nil
            if let retry = retryUntil, let closeBy = state.withLock({ $0.closeDeadline }) {
                retryUntil = min(retry, closeBy)
            }
            setClosingStage("committing offsets before releasing revoked partitions")
            commitBeforeRelease(rk, partitions, retryUntil: retryUntil)
        }
        if cooperative {
            if let error = rd_kafka_incremental_unassign(rk, list) {
                report(.rebalance, "incremental unassign", error)
            }
        } else {
            let response = rd_kafka_assign(rk, nil)
            if response != RD_KAFKA_RESP_ERR_NO_ERROR {
                eventHandler?(.error(KafkaError(.rebalance, "unassign", response: response)))
            }
        }
        // The final revoke comes from within rd_kafka_consumer_close, which then leaves the group.
        if !isRunning { setClosingStage("in rd_kafka_consumer_close (leaving the group)") }
    }

    /// Commits the stored offsets synchronously, so what the handler stored is in Kafka before the
    /// partitions move.
    ///
    /// With the COOPERATIVE protocol this runs after the group's SyncGroup, and a coordinator still
    /// completing the round (other members not yet synced) answers REBALANCE_IN_PROGRESS for a while,
    /// so retriable answers are retried until `retryUntil` (the revocation deadline, at least a
    /// second). With the EAGER protocol the revoke comes before this member rejoins, while the group
    /// waits for it, so there is one attempt (brokers accept that commit; librdkafka's mock cluster
    /// refuses it).
    private func commitBeforeRelease(
        _ rk: OpaquePointer, _ partitions: [KafkaTopicPartition], retryUntil: ContinuousClock.Instant?
    ) {
        var attempts = 0
        while true {
            attempts += 1
            let response = rd_kafka_commit(rk, nil, 0)
            if response == RD_KAFKA_RESP_ERR_NO_ERROR || response == RD_KAFKA_RESP_ERR__NO_OFFSET { return }
            let retriable = Self.retriableCommitErrors.contains(response.rawValue)
            guard retriable, let retryUntil, ContinuousClock.now < retryUntil else {
                let list = partitions.map(\.description).joined(separator: ", ")
                eventHandler?(.error(KafkaError(
                    .commit, "gave up committing before releasing revoked \(list) after \(attempts) attempt(s); "
                        + "their records since the last commit will be delivered again to the next owner",
                    response: response
                )))
                return
            }
            DedicatedThread.sleep(milliseconds: 20)
        }
    }

    private static let retriableCommitErrors = Set([
        RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
        RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__WAIT_COORD,
        RD_KAFKA_RESP_ERR__TIMED_OUT,
    ].map(\.rawValue))

    private func dropFromState(_ partitions: [KafkaTopicPartition]) {
        let revoked = Set(partitions)
        state.withLock { state in
            state.assignment.subtract(revoked)
            state.pausedByOwner.subtract(revoked)
            state.pausedForBuffer.subtract(revoked)
            state.buffer.removeAll { revoked.contains($0.topicPartition) }
            resumeIfDrained(&state)
        }
    }

    /// Runs the owner's handler and waits for it on this (the poll) thread: until a little after the
    /// event's deadline (the handler returns once it has passed), and never longer after a close
    /// deadline or revocation limit, even one set while it waits.
    private func runRebalanceHandler(_ event: KafkaRebalanceEvent, deadline: ContinuousClock.Instant) {
        guard let handler = rebalanceHandler else { return }
        let done = DispatchSemaphore(value: 0)
        Task {
            await handler(event)
            done.signal()
        }
        let started = ContinuousClock.now
        let waitUntil = deadline.advanced(by: Self.handlerReturnAllowance)
        while true {
            var until = waitUntil
            if let limit = waitLimit { until = min(until, limit.advanced(by: Self.handlerReturnAllowance)) }
            let now = ContinuousClock.now
            if now >= until { break }
            let slice = min(until - now, Self.limitCheckInterval)
            let milliseconds = Int(clamping: slice.wholeMilliseconds)
            if done.wait(timeout: .now() + .milliseconds(milliseconds)) == .success { return }
        }
        if done.wait(timeout: .now()) == .success { return }
        eventHandler?(.error(KafkaError(
            code: .timeout,
            message: "rebalance handler did not return within \(ContinuousClock.now - started) (its deadline, or a "
                + "shutdown's, passed); continuing without it"
        )))
    }

    /// How long after its deadline a rebalance handler may take to return (it then only forgets state).
    private static let handlerReturnAllowance: Duration = .milliseconds(200)
    /// How often a wait for the rebalance handler looks for a deadline set meanwhile.
    private static let limitCheckInterval: Duration = .milliseconds(20)

    private func report(_ code: KafkaError.Code, _ context: String, _ error: OpaquePointer) {
        eventHandler?(.error(KafkaError(code, context, consuming: error)))
    }
}
