// Exactly-once results on Kafka (`kafka.exactly_once`): a transactional producer writes the held results of
// newly committable records together with the consumer group's offsets, every transaction interval (or
// sooner once enough records are ready), on a thread of its own, since every transaction call but `begin`
// blocks on the coordinator.
//
// Failures, as librdkafka documents them for transactional producers:
// - abortable (a delivery failed, the group's generation moved, the coordinator timed out): abort, then
//   produce the SAME held results again in a new transaction. Not "rewind the consumer and redo the
//   records", which is what the Kafka docs sketch for a stateless copy: redoing a record here means pushing
//   it to APNs again, so every device of an aborted batch would get its notification twice. The results
//   are already known; only writing them failed.
// - fatal (fenced by a newer instance with the same transactional.id, an unrecoverable broker answer):
//   stop for good without committing anything more; the worker exits non-zero, and the records whose
//   results were not committed are done again by the group.

import Dispatch
public import Kafka
import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The ``TransactionalResultSink`` over a transactional ``KafkaProducer`` and the consumer's group metadata.
public final class KafkaTransactionalSink: TransactionalResultSink {
    /// What happened to a transaction, for metrics and the log.
    public enum Event: Sendable {
        case committed(records: Int)
        /// Aborted; its results are produced again in the next transaction.
        case aborted(cause: String)
        /// The producer cannot go on; the worker must stop.
        case fatal(reason: String)
    }

    let producer: KafkaProducer
    let groupMetadata: @Sendable () -> KafkaGroupMetadata?
    let interval: Duration
    let afterRecords: Int
    let onEvent: @Sendable (Event) -> Void
    /// The longest one transaction call may block when no deadline is nearer.
    static let callTimeout = Duration.seconds(10)

    typealias Settle = @Sendable (Bool) -> Void

    private struct Waiter {
        let once: ResumeOnce<Bool>
        let deadline: ContinuousClock.Instant
        /// Whether a transaction for it aborted already: it gets one more, not a loop of aborts (offsets of
        /// partitions lost in a rebalance fail every time until they are released).
        var retried = false
    }

    private struct State {
        var ledger = TransactionLedger<Settle>()
        var failure: String?
        var waiters: [Waiter] = []
        var stopped = false
        var woken = false
        /// An abort that did not finish (it timed out): tried again before the next transaction begins.
        var abortPending = false
        /// A transaction is under way (its batch was taken and its outcome is not settled yet).
        var transacting = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let committedCount = Atomic<Int>(0)
    private let abortedCount = Atomic<Int>(0)

    /// - Parameters:
    ///   - producer: configured with a `transactional.id`.
    ///   - groupMetadata: the input consumer's group metadata now (``KafkaConsumer/groupMetadata()``).
    ///   - interval: how often a transaction commits what became committable.
    ///   - afterRecords: a transaction starts sooner once this many held records are committable.
    public init(
        producer: KafkaProducer, groupMetadata: @escaping @Sendable () -> KafkaGroupMetadata?, interval: Duration,
        afterRecords: Int, onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.producer = producer
        self.groupMetadata = groupMetadata
        self.interval = max(interval, .milliseconds(1))
        self.afterRecords = max(1, afterRecords)
        self.onEvent = onEvent
    }

    /// Registers the transactional.id (fencing an earlier instance and aborting what it left open), then
    /// starts the transaction thread. Waits up to `timeout`, off the cooperative pool.
    public func start(timeout: Duration) async throws {
        let producer = self.producer
        let failure: KafkaTransactionError? = await withCheckedContinuation { continuation in
            Self.thread("kafka-txn-init") {
                do throws(KafkaTransactionError) {
                    try producer.initTransactions(timeout: timeout)
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }
        }
        if let failure { throw failure }
        Self.thread("kafka-transactions") { [self] in run() }
    }

    public var maximumRecordBytes: Int? { producer.maximumMessageBytes }

    public func hold(
        _ outputs: [OutboundRecord], partition: TopicPartition, offset: Int64,
        settled: @escaping @Sendable (Bool) -> Void
    ) {
        state.withLock { $0.ledger.hold(outputs, partition: partition, offset: offset, token: settled) }
    }

    public func committable(_ partition: TopicPartition, nextOffset: Int64) {
        let wakeNow = state.withLock { state -> Bool in
            state.ledger.committable(partition, nextOffset: nextOffset)
            guard state.ledger.readyRecords >= afterRecords, !state.woken else { return false }
            state.woken = true
            return true
        }
        if wakeNow { wake.signal() }
    }

    public func commit(until deadline: ContinuousClock.Instant) async -> Bool {
        await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped, state.failure == nil else { return false }
                state.waiters.append(Waiter(once: once, deadline: deadline))
                return true
            }
            guard accepted else {
                once.resume(returning: false)
                return
            }
            wake.signal()
            Task {
                try? await Task.sleep(until: deadline, clock: .continuous)
                once.resume(returning: false)
            }
        }
    }

    public func release(_ partitions: [TopicPartition], waitingUntil deadline: ContinuousClock.Instant) async {
        while state.withLock({ $0.transacting }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
        let dropped = state.withLock { $0.ledger.release(partitions) }
        for settle in dropped { settle(false) }
    }

    public var failure: String? { state.withLock { $0.failure } }

    /// Records whose results are held, waiting to be committed (`apns_worker_results_held`).
    public var heldRecords: Int { state.withLock { $0.ledger.heldRecords } }
    public var transactionsCommitted: Int { committedCount.load(ordering: .relaxed) }
    public var transactionsAborted: Int { abortedCount.load(ordering: .relaxed) }

    /// Ends the transaction thread after the transaction under way (the producer is about to close); what
    /// is held then stays uncommitted, and the group does those records again.
    public func stop() {
        let waiters = state.withLock { state -> [Waiter] in
            state.stopped = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.once.resume(returning: false) }
        wake.signal()
    }

    // MARK: The transaction thread

    private enum Attempt {
        case committed
        case aborted(String)
        case fatal(String)
    }

    private func run() {
        let (seconds, attoseconds) = interval.components
        let milliseconds = Int(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        while true {
            _ = wake.wait(timeout: .now() + .milliseconds(max(1, milliseconds)))
            let now = ContinuousClock.now
            let (batch, waiters, stopped) = state.withLock {
                state -> (TransactionLedger<Settle>.Batch?, [Waiter], Bool) in
                state.woken = false
                // Waiters past their deadline were answered by their timers.
                let waiters = state.waiters.filter { $0.deadline > now }
                state.waiters = []
                let batch = state.ledger.nextBatch()
                state.transacting = batch != nil && !state.stopped && state.failure == nil
                return (batch, waiters, state.stopped || state.failure != nil)
            }
            if stopped {
                for waiter in waiters { waiter.once.resume(returning: false) }
                return
            }
            guard let batch else {
                for waiter in waiters { waiter.once.resume(returning: true) }
                continue
            }
            let attempt = transact(batch, deadline: waiters.map(\.deadline).min())
            switch attempt {
            case .committed:
                let settled = state.withLock { state in
                    state.transacting = false
                    return state.ledger.committed(batch)
                }
                committedCount.add(1, ordering: .relaxed)
                for settle in settled { settle(true) }
                onEvent(.committed(records: batch.heldRecords))
                for waiter in waiters { waiter.once.resume(returning: true) }
            case .aborted(let cause):
                state.withLock { $0.transacting = false }
                abortedCount.add(1, ordering: .relaxed)
                onEvent(.aborted(cause: cause))
                // A revoke or shutdown waiting for this commit gets one more try within its deadline.
                let again = waiters.filter { !$0.retried }.map { waiter in
                    var waiter = waiter
                    waiter.retried = true
                    return waiter
                }
                for waiter in waiters where waiter.retried { waiter.once.resume(returning: false) }
                if !again.isEmpty {
                    state.withLock { $0.waiters.append(contentsOf: again) }
                    wake.signal()
                }
            case .fatal(let cause):
                let reason = "Kafka transactions stopped for good: \(cause)"
                state.withLock { state in
                    state.transacting = false
                    state.failure = state.failure ?? reason
                }
                onEvent(.fatal(reason: reason))
                for waiter in waiters { waiter.once.resume(returning: false) }
                return
            }
        }
    }

    /// One transaction: begin, produce the batch's results, send its offsets, commit; abort on failure.
    private func transact(_ batch: TransactionLedger<Settle>.Batch, deadline: ContinuousClock.Instant?) -> Attempt {
        func limit() -> Duration {
            guard let deadline else { return Self.callTimeout }
            return max(.milliseconds(1), min(Self.callTimeout, deadline - .now))
        }
        do throws(KafkaTransactionError) {
            if state.withLock({ $0.abortPending }) {
                try producer.abortTransaction(timeout: limit())
                state.withLock { $0.abortPending = false }
            }
            try producer.beginTransaction()
            for record in batch.records { try produce(record) }
            guard let group = groupMetadata() else {
                throw KafkaTransactionError(
                    kind: .abortable, error: KafkaError(code: .commit, message: "the consumer has no group metadata"))
            }
            var offsets: [KafkaTopicPartition: Int64] = [:]
            for (partition, offset) in batch.nextOffsets {
                offsets[KafkaTopicPartition(topic: partition.topic, partition: partition.partition)] = offset
            }
            try producer.sendOffsetsToTransaction(offsets, group: group, timeout: limit())
            try commitRetrying(limit)
            return .committed
        } catch {
            if error.kind == .fatal { return .fatal("\(error)") }
            do throws(KafkaTransactionError) {
                try producer.abortTransaction(timeout: limit())
            } catch let abortError {
                if abortError.kind == .fatal { return .fatal("\(abortError) (after \(error))") }
                state.withLock { $0.abortPending = true }
            }
            return .aborted("\(error)")
        }
    }

    /// Commits; a retriable failure (a timeout, the coordinator moving) is tried again while time is left.
    private func commitRetrying(_ limit: () -> Duration) throws(KafkaTransactionError) {
        while true {
            do throws(KafkaTransactionError) {
                try producer.commitTransaction(timeout: limit())
                return
            } catch {
                guard error.kind == .retriable, limit() > .milliseconds(1), !state.withLock({ $0.stopped }) else {
                    throw error
                }
            }
        }
    }

    /// Enqueues one result in the open transaction, waiting while librdkafka's queue is full.
    private func produce(_ record: OutboundRecord) throws(KafkaTransactionError) {
        let headers = record.headers.map { KafkaHeader($0) }
        while true {
            do throws(KafkaError) {
                // A failed delivery fails the commit (abortable): the report itself needs no handling.
                if try producer.trySend(
                    topic: record.topic, key: record.key, value: record.value, headers: headers, onDelivery: { _ in })
                {
                    return
                }
            } catch {
                // The pipeline replaced every record larger than message.max.bytes before holding it; one that
                // librdkafka still refuses would fail every retry, so it stops the worker instead of looping.
                let kind: KafkaTransactionError.Kind =
                    error.code == .fatal || error.code == .messageTooLarge ? .fatal : .abortable
                throw KafkaTransactionError(kind: kind, error: error)
            }
            if state.withLock({ $0.stopped }) {
                throw KafkaTransactionError(
                    kind: .abortable, error: KafkaError(code: .closed, message: "the worker is shutting down"))
            }
            // The queue drains on the producer's poll thread.
            usleep(1000)
        }
    }

    private static func thread(_ name: String, _ body: @escaping @Sendable () -> Void) {
        do {
            try NamedThread.detached(name: name, body)
        } catch {
            fatalError("\(error): Kafka transactions need a thread of their own")
        }
    }
}
