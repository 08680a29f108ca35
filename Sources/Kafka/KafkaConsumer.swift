// A group consumer over librdkafka: a dedicated poll thread feeds a small bounded hand-off that an
// async sequence drains; rebalances, pauses, offset storage, commits and lag are methods here.

import Platform

/// A Kafka group consumer.
///
/// ```swift
/// let consumer = try KafkaConsumer(configuration: config, rebalanceHandler: { event in ... })
/// try consumer.subscribe(topics: ["push.requests"])
/// for try await message in consumer.messages {
///     ... process ...
///     try consumer.storeOffset(topic: message.topic, partition: message.partition, nextOffset: message.offset + 1)
/// }
/// ```
///
/// - Important: Threading. librdkafka is polled on a thread the consumer owns (never on Swift's
///   cooperative pool). Received records go into a hand-off of at most `bufferCapacity` records that
///   ``messages`` drains. When the hand-off is full the poll thread waits for room, so a slow reader
///   slows fetching without extra work (librdkafka's own prefetch queue is bounded by
///   `queued.max.messages.kbytes`). If the reader takes nothing for `stallTimeout`, the consumer
///   pauses every assigned partition (librdkafka drops what it prefetched and later refetches from
///   the next undelivered offset) and goes on polling so rebalances are still served; it resumes them
///   once half of the hand-off has been taken. Memory stays bounded even if the reader stops.
///
///   Flow control of records in flight (taken but not finished) is the owner's job: pause
///   partitions with ``pause(_:)`` when too much is in flight and ``resume(_:)`` them below a
///   low-water mark. Up to `bufferCapacity` records already in the hand-off may still arrive after
///   a pause.
///
/// Offsets: nothing is committed unless stored. Store the offset of the NEXT record to read
/// (`message.offset + 1`) once a record and every earlier record of its partition are finished;
/// they are committed every `commitInterval` in which some were stored (when set), by librdkafka
/// every `autoCommitInterval` while the group is steady, on ``commit()``, on revoke and on ``close()``.
///
/// Rebalances: the `rebalanceHandler` runs for every non-empty assignment change while the poll
/// thread waits for it (at most `rebalanceDeadline`). Both EAGER (`range`, `roundrobin`) and
/// COOPERATIVE (`cooperative-sticky`) protocols are handled. On revoke the handler should finish
/// or abandon the in-flight records of those partitions and store their offsets; then the consumer
/// commits synchronously and releases the partitions. See ``KafkaRevocation``.
///
/// Status: ``status`` says whether any broker answers and whether the consumer holds group
/// membership; the `statusHandler` hears of every change.
///
/// Shutdown: ``close(deadline:)`` returns by its deadline whatever the cluster does; a close that
/// cannot finish by then is abandoned on the poll thread (it goes on there, and the handle is never
/// freed while it does). ``limitRevocations(until:)`` makes a revoke wait part of a shutdown's budget.
public final class KafkaConsumer: Sendable {
    let client: RDKafkaClient
    let core: ConsumerCore
    /// Set when `commitInterval` is: commits what was stored, on a thread of its own.
    let promptCommits: PromptCommits?

    /// Creates the consumer and starts its poll thread. It joins the group on ``subscribe(topics:)``.
    ///
    /// - Parameters:
    ///   - rebalanceHandler: told about assigned and revoked partitions; see ``KafkaRebalanceEvent``.
    ///     Runs as a task while the poll thread waits for it to return or for `rebalanceDeadline`.
    ///   - eventHandler: receives librdkafka's log lines, errors and statistics (see ``KafkaEvent``).
    ///   - statusHandler: told about every change of ``status``, on the poll thread.
    /// - Throws: ``KafkaError/Code/invalidConfiguration`` naming every rejected property.
    public init(
        configuration: KafkaConsumerConfiguration,
        rebalanceHandler: (@Sendable (KafkaRebalanceEvent) async -> Void)? = nil,
        eventHandler: KafkaEventHandler? = nil,
        statusHandler: KafkaConsumerStatusHandler? = nil
    ) throws(KafkaError) {
        let properties = configuration.librdkafkaProperties()
        let strategy = properties.last { $0.0 == "partition.assignment.strategy" }?.1 ?? ""
        let promptCommits = configuration.commitInterval.map {
            PromptCommits(interval: $0, afterRecords: configuration.commitAfterRecords)
        }
        let core = ConsumerCore(
            capacity: configuration.bufferCapacity, stallTimeout: configuration.stallTimeout,
            rebalanceDeadline: configuration.rebalanceDeadline,
            rebalanceHandler: rebalanceHandler, eventHandler: eventHandler, statusHandler: statusHandler,
            forwardsStatistics: configuration.statisticsInterval != nil,
            usesCooperativeSticky: strategy.contains("cooperative-sticky"), promptCommits: promptCommits,
            strandedPartitionThreshold: configuration.strandedPartitionThreshold
        )
        let callbacks = RDKafkaCallbacks(
            eventHandler: { [core] event in core.observe(event) }, redactor: SecretRedactor(properties: properties),
            onFatal: { [core] error in core.fail(error) },
            onRebalance: { [core] rebalance in core.rebalance(rebalance) }
        )
        let client = try RDKafkaClient.make(.consumer, properties: properties, callbacks: callbacks)
        client.redirectMainQueueToConsumerPoll()
        core.state.withLock { $0.handle = client.borrowed }
        self.client = client
        self.core = core
        self.promptCommits = promptCommits
        DedicatedThread.start(name: "kafka-consumer") { [client, core] in
            Self.pollLoop(client: client, core: core)
        }
        if let threshold = configuration.strandedPartitionThreshold {
            DedicatedThread.start(name: "kafka-stranded") { [client, core] in
                StrandedPartitionWatch.run(threshold: threshold, client: client, core: core)
            }
        }
        if let promptCommits {
            DedicatedThread.start(name: "kafka-commits") { [client] in promptCommits.run(client: client) }
        }
    }

    deinit {
        // Without an explicit close() the poll thread still leaves the group and then exits.
        requestClose()
    }

    // MARK: Subscription and records

    /// Subscribes to `topics` (replacing any earlier subscription); the group assigns partitions.
    /// Returns at once (it waits only for librdkafka's main thread, no network I/O); assignments
    /// arrive through the rebalance handler.
    public func subscribe(topics: [String]) throws(KafkaError) {
        try client.subscribe(topics: topics)
        core.state.withLock { $0.subscribed = true }
    }

    /// The received records, in order per partition. Ends after ``close()``; throws a fatal error.
    /// Several tasks may iterate at once; each record goes to one of them.
    public var messages: KafkaConsumerMessages { KafkaConsumerMessages(client: client, core: core) }

    /// Whether `partition` is still assigned under `assignment` (a record's ``KafkaConsumerMessage/assignment``):
    /// false once it was revoked, even if it was assigned again since. A record that is no longer current
    /// must not be processed: its partition's owner reads it again. Non-blocking (at most one short lock); any
    /// thread.
    public func isCurrent(_ partition: KafkaTopicPartition, assignment: UInt64) -> Bool {
        core.isCurrent(partition, assignment: assignment)
    }

    /// How many received records wait in the hand-off (at most `bufferCapacity`, see ``KafkaConsumer``).
    public var bufferedMessageCount: Int { core.bufferedCount }

    /// How many times the poll thread restarted a partition's fetching that librdkafka (before 2.2) had
    /// left idle with records to read (see `StalledFetchRestarter`).
    package var fetchRestarts: Int { core.fetchRestarts.load(ordering: .relaxed) }

    /// Whether the first record of `partition`, paused before it fetched, waits for its resume, for tests.
    package func holdsFirstRecord(of partition: KafkaTopicPartition) -> Bool {
        core.state.withLock { $0.assigned[partition]?.heldFirstRecord != nil }
    }

    /// Restarts of partitions the stranded-partition watch found, for tests.
    package var strandedRestarts: Int { core.strandedRestarts.load(ordering: .relaxed) }
    /// Checks of the stranded-partition watch so far (positions read), for tests.
    package var strandedChecks: Int { core.strandedChecks.load(ordering: .relaxed) }

    /// Pauses `partition` in librdkafka behind the consumer's back, as confluentinc/librdkafka#5591 left one
    /// in production: for tests of the stranded-partition watch.
    package func strandForTesting(_ partition: KafkaTopicPartition) {
        core.strandForTesting(partition)
    }

    /// How many records (and events) librdkafka has fetched that the poll thread has not yet taken, for tests.
    package var queuedInLibrdkafka: Int { client.consumerQueueLength() }

    /// Whether brokers answer and the consumer holds group membership, as of the last check
    /// (librdkafka's error events, its statistics every `connectionCheckInterval`, and rebalances).
    public var status: KafkaConsumerStatus { core.status }

    /// The partitions this consumer holds: each from its assignment (recorded before the rebalance handler
    /// hears of it) until its revoke starts (before the handler hears of that). These are the partitions
    /// ``pause(_:)`` and ``resume(_:)`` accept. librdkafka's own list differs at both ends: it lists an
    /// assignment a moment before it is recorded here, and a revoked partition until the handler has
    /// handed it over. Non-blocking; any thread.
    public func assignment() -> [KafkaTopicPartition] {
        core.state.withLock { $0.assignment }.sorted()
    }

    // MARK: Flow control

    /// Stops fetching these assigned partitions until ``resume(_:)``. Records already in the
    /// hand-off still arrive; of a partition that has not fetched since its assignment, none does
    /// (librdkafka is told once it has, and its first record waits for the resume). A pause ends when
    /// the partition is revoked. Non-blocking; any thread.
    /// - Throws: ``KafkaError/Code/partitionState`` if a partition is not assigned to this consumer.
    public func pause(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try core.pauseByOwner(partitions)
    }

    /// Stops fetching every partition this consumer holds now (``assignment()``), as ``pause(_:)`` does; a
    /// partition assigned later fetches as usual. Returns the partitions paused. Non-blocking; any thread.
    /// - Throws: ``KafkaError/Code/partitionState`` if librdkafka refused a pause.
    @discardableResult
    public func pauseAll() throws(KafkaError) -> [KafkaTopicPartition] {
        try core.pauseAllByOwner().sorted()
    }

    /// Fetches these partitions again from the next record not yet handed out. Non-blocking; any thread.
    /// - Throws: ``KafkaError/Code/partitionState`` if a partition is not assigned to this consumer.
    public func resume(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try core.resumeByOwner(partitions)
    }

    // MARK: Shutdown

    /// Leaves the group cleanly: the rebalance handler gets the final revoke, stored offsets are
    /// committed, the group is told this member left (so it rebalances at once), and ``messages``
    /// ends. Safe to call more than once.
    ///
    /// Without a deadline it waits for all of it, however long librdkafka takes (with the brokers gone,
    /// that can be forever). With one, every wait of the closing poll thread (for the first assignment,
    /// for the rebalance handler, for commit retries) ends by then, and this returns by then: a close
    /// still unfinished is abandoned (it goes on, on the poll thread) and reported as an error.
    /// - Throws: ``KafkaError/Code/timeout`` for an abandoned close, saying where it was and why;
    ///   otherwise the error librdkafka reported while closing, if any.
    public func close(deadline: ContinuousClock.Instant? = nil) async throws(KafkaError) {
        let started = ContinuousClock.now
        let closed = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let once = ResumeOnce(continuation)
            let alreadyClosed = core.state.withLock { state in
                if state.lifecycle != .closed { state.closeWaiters.append(once) }
                return state.lifecycle == .closed
            }
            if alreadyClosed {
                once.resume(returning: true)
                return
            }
            core.requestClose(deadline: deadline)
            if let deadline {
                Task {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    once.resume(returning: false)
                }
            }
        }
        let (stage, closeError) = core.state.withLock { ($0.closingStage, $0.closeError) }
        guard closed else {
            throw KafkaError(
                code: .timeout,
                message: "closing the consumer was abandoned after "
                    + "\(ContinuousClock.now - started), while \(stage) (\(core.status))")
        }
        if let closeError { throw closeError }
    }

    /// Bounds every revocation from now on, and one under way, by `deadline`: the rebalance handler is
    /// given at most `deadline`, and the poll thread waits for it at most until then before it commits
    /// what was stored and releases the partitions. For a bounded shutdown, whose drain deadline then
    /// includes the revoke wait instead of coming on top of it. Non-blocking; any thread.
    public func limitRevocations(until deadline: ContinuousClock.Instant) {
        core.limitRevocations(until: deadline)
    }

    private func requestClose() {
        core.requestClose()
    }
}

/// The records a ``KafkaConsumer`` receives. Iterating waits without blocking a thread.
public struct KafkaConsumerMessages: AsyncSequence, Sendable {
    public typealias Element = KafkaConsumerMessage

    fileprivate let client: RDKafkaClient
    fileprivate let core: ConsumerCore

    public struct AsyncIterator: AsyncIteratorProtocol {
        /// Keeps the handle alive while a reader waits, even if the consumer object is gone.
        fileprivate let client: RDKafkaClient
        fileprivate let core: ConsumerCore

        /// The next record; `nil` after the consumer closed or when the task is cancelled.
        /// - Throws: a ``KafkaError/Code/fatal`` error when the consumer can no longer work.
        public mutating func next() async throws -> KafkaConsumerMessage? {
            try await core.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(client: client, core: core) }
}
