// The worker's two edges as plug-ins: it reads from an EventSource, writes to a ResultSink, and
// sends through a PushTransport. Kafka and APNs are the production implementations; in-memory ones
// make the pipeline's logic testable without sockets.

public import APNs

/// A header of a Kafka record.
public struct RecordHeader: Sendable, Hashable {
    public var name: String
    public var value: [UInt8]?
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
    public init(_ name: String, _ text: String) {
        self.init(name: name, value: Array(text.utf8))
    }
}

/// A record read from the input topic.
public struct SourceRecord: Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [RecordHeader]
    /// The record's timestamp in UNIX seconds, when the broker gave one.
    public var timestamp: Double?
    /// Which assignment of its partition the source received the record under (the source's number;
    /// 0 from a source whose partitions never move): see ``EventSource/isCurrent(_:)``.
    public var assignment: UInt64 = 0

    public init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
        headers: [RecordHeader] = [], timestamp: Double? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
    }

    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}

/// A record the worker publishes: an outcome, an invalid-token event or a dead letter.
public struct OutboundRecord: Sendable {
    public var topic: String
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [RecordHeader]
    public init(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [RecordHeader] = []) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// What the pipeline is told by its source. Called on the source's own thread.
public protocol SourceHandler: Sendable {
    /// A record to process. Must not block: the source's thread also serves the group protocol.
    func received(_ record: SourceRecord)
    /// Partitions now owned by this worker.
    func assigned(_ partitions: [TopicPartition])
    /// Partitions about to be taken away. Returns when their in-flight records finished or the
    /// deadline passed, having stored what finished; the source commits after it returns and
    /// before it releases the partitions.
    func revoking(_ partitions: [TopicPartition], deadline: ContinuousClock.Instant) async
}

/// Where records come from (Kafka in production).
public protocol EventSource: Sendable {
    /// Starts delivering records to `handler`, from a thread the source owns.
    func start(handler: any SourceHandler) throws
    /// Stores the next offset to read for a partition; committed by the source's auto-commit.
    func store(_ partition: TopicPartition, nextOffset: Int64)
    /// Stops handing over records of these partitions (the in-flight cap is reached); quick to undo.
    func pause(_ partitions: [TopicPartition])
    func resume(_ partitions: [TopicPartition])
    /// Stops fetching these partitions while records already fetched are still handed over (one
    /// partition holds too many records behind a slow one); `resumeFetching` fetches again from the
    /// next record not yet handed over.
    func stopFetching(_ partitions: [TopicPartition])
    func resumeFetching(_ partitions: [TopicPartition])
    /// Stops delivering records (in-flight records still finish and store their offsets).
    func stopReceiving()
    /// Commits stored offsets and leaves the group.
    func close() async throws
    /// Whether the record's partition is still assigned as it was when the record was received. A record
    /// handed over after its partition was revoked (even if it was assigned again since) must not be
    /// taken: the partition's owner reads it again from the committed offset, and taking it would make
    /// this worker process a record it does not own, or, with the partition back, start the partition's
    /// bookkeeping past the records read again, which would then be dropped as already taken and their
    /// offsets stored while their first processing (abandoned at the revoke) may still be running.
    /// Called under the pipeline's lock: non-blocking.
    func isCurrent(_ record: SourceRecord) -> Bool
}

extension EventSource {
    /// For sources whose partitions never move.
    public func isCurrent(_ record: SourceRecord) -> Bool { true }
}

/// Where results go (Kafka in production). Acknowledgements arrive asynchronously.
public protocol ResultSink: Sendable {
    /// Publishes a record; `acknowledged` runs exactly once, when the record is durably written or
    /// has definitively failed. A record the sink can never take because of its size fails with
    /// ``RecordTooLargeError``, which carries the record (the pipeline then publishes a smaller dead letter
    /// in its place); any other error is a failure of the sink itself.
    func publish(_ record: OutboundRecord, acknowledged: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Publishes a source record's results, in order; `acknowledged` runs exactly once per record, with its
    /// index in `records`, as for ``publish(_:acknowledged:)``. One call and one closure per source record
    /// on the hot path (the default publishes the records one by one).
    func publish(
        _ records: [OutboundRecord], acknowledged: @escaping @Sendable (_ index: Int, Result<Void, any Error>) -> Void)
    /// Waits up to `timeout` seconds for every published record to be acknowledged.
    func flush(timeout: Double) async -> Bool
}

extension ResultSink {
    public func publish(
        _ records: [OutboundRecord], acknowledged: @escaping @Sendable (_ index: Int, Result<Void, any Error>) -> Void
    ) {
        for index in records.indices { publish(records[index]) { acknowledged(index, $0) } }
    }
}

/// A record larger than the sink takes (Kafka's `message.max.bytes`): publishing it again cannot succeed.
public struct RecordTooLargeError: Error, Sendable, CustomStringConvertible {
    /// The refused record, handed back: the pipeline keeps no copy of what it published, and replaces this
    /// one with a smaller dead letter.
    public var record: OutboundRecord
    /// The most the sink takes, in bytes (key, value and headers together), when it knows.
    public var limitBytes: Int?
    /// The sink's own account, naming the size, the limit and where it was refused.
    public var detail: String

    public init(record: OutboundRecord, limitBytes: Int?, detail: String) {
        self.record = record
        self.limitBytes = limitBytes
        self.detail = detail
    }

    /// The topic the record was for.
    public var topic: String { record.topic }

    public var description: String { detail }
}

/// How an (event, device) pair ended: the delivery statuses, plus `skipped` when nothing was sent.
public enum OutcomeStatus: String, Sendable, CaseIterable {
    case delivered, rejected, failed, expired, skipped

    public init(_ status: DeliveryStatus) {
        switch status {
        case .delivered: self = .delivered
        case .rejected: self = .rejected
        case .failed: self = .failed
        case .expired: self = .expired
        // Never an outcome: the pipeline parks such pushes on the retry topic instead (Pipeline.results).
        case .credentialRefused: self = .failed
        // Never an outcome: a record with a withdrawn push publishes nothing (Pipeline.process); the
        // partition's next owner does it again.
        case .withdrawn: self = .failed
        }
    }
}

/// Sends one notification, retrying inside as its policy says.
public protocol PushTransport: Sendable {
    /// Sends with retries; the result has every attempt, each with its own fresh apns-id.
    func deliver(_ push: PlannedPush) async -> DeliveryResult

    /// Sends all of an event's pushes at once (none waits for another) and returns their results in
    /// order. The default runs `deliver` for each concurrently.
    func deliverAll(_ pushes: ArraySlice<PlannedPush>) async -> [DeliveryResult]

    /// `deliverAll`, with pushes that still wait when `withdrawal` is withdrawn ending `withdrawn`,
    /// unsent (the pipeline withdraws a partition's pushes when the partition is revoked, and all of them
    /// when it stops). The default ignores `withdrawal`: its pushes all finish.
    func deliverAll(_ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?) async -> [DeliveryResult]

    /// `deliverAll(_:withdrawal:)` for a caller that is not a task: `completion` gets the results once
    /// every push has ended. The default runs `deliverAll(_:withdrawal:)` in a task of its own.
    func beginDeliverAll(
        _ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?,
        completion: @escaping @Sendable ([DeliveryResult]) -> Void)

    /// Requests the transport can carry at once now, counting the room it may still grow into; the
    /// pipeline sizes its in-flight cap from it. Nil (the default): no limit to follow, so the configured
    /// cap applies as it is.
    var streamCapacity: Int? { get }
}

extension PushTransport {
    public var streamCapacity: Int? { nil }

    public func beginDeliverAll(
        _ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?,
        completion: @escaping @Sendable ([DeliveryResult]) -> Void
    ) {
        Task { completion(await deliverAll(pushes, withdrawal: withdrawal)) }
    }

    public func deliverAll(_ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?) async -> [DeliveryResult] {
        await deliverAll(pushes)
    }

    public func deliverAll(_ pushes: ArraySlice<PlannedPush>) async -> [DeliveryResult] {
        await deliverConcurrently(pushes)
    }

    /// Up to this many pushes go through a chain of `async let`s, whose child tasks live in the parent's
    /// allocator; more go through a task group.
    static var asyncLetSends: Int { 8 }

    /// `deliver` for every push at once: child tasks, since each send suspends until its response.
    public func deliverConcurrently(_ pushes: ArraySlice<PlannedPush>) async -> [DeliveryResult] {
        guard let first = pushes.first else { return [] }
        if pushes.count == 1 { return [await deliver(first)] }
        if pushes.count <= Self.asyncLetSends {
            async let rest = deliverConcurrently(pushes.dropFirst())
            let firstResult = await deliver(first)
            return [firstResult] + (await rest)
        }
        return await withTaskGroup(of: (Int, DeliveryResult).self) { group in
            for index in pushes.indices.dropFirst() {
                let push = pushes[index]
                group.addTask { (index, await self.deliver(push)) }
            }
            var results = [DeliveryResult?](repeating: nil, count: pushes.count)
            results[0] = await deliver(first)
            for await (index, result) in group { results[index - pushes.startIndex] = result }
            return results.map { $0! }
        }
    }
}

/// A request the rules produced for one device, ready to send.
public struct PlannedPush: Sendable {
    public var request: APNsRequest
    public var app: String
    public var ruleID: String
    public init(request: APNsRequest, app: String, ruleID: String) {
        self.request = request
        self.app = app
        self.ruleID = ruleID
    }
}

/// What the rules decided for one device of an event.
public enum PlannedDelivery: Sendable {
    /// The device gets a push: the next one of its `EventPlan`'s pushes (they are in the same order).
    case send(device: EventDevice)
    /// Nothing is sent: no rule matched (`no_rule`), or a rule decided so. Outcome `skipped`.
    case skip(device: EventDevice, reason: String, ruleID: String?, topic: String?, pushType: String?)
    /// The rules produced something Apple would reject (too large, invalid token...). Outcome `rejected`.
    case reject(device: EventDevice, reason: String, detail: String, ruleID: String?, topic: String?, pushType: String?)
}

/// What the rules decided for an event: the pushes to send, and for each device, in the event's order,
/// whether it gets the next of them or why not. The pushes are kept once, where the transport reads them:
/// a copy in each delivery as well cost a dozen retains and releases per push, and their memory for the
/// whole round trip to APNs.
public struct EventPlan: Sendable {
    public private(set) var pushes: [PlannedPush] = []
    public private(set) var deliveries: [PlannedDelivery] = []

    public init(capacity: Int = 0) {
        pushes.reserveCapacity(capacity)
        deliveries.reserveCapacity(capacity)
    }

    /// `device` gets `push`.
    public mutating func send(_ push: consuming PlannedPush, to device: consuming EventDevice) {
        pushes.append(push)
        deliveries.append(.send(device: device))
    }

    /// A device that gets nothing: a skip or a rejection (a send goes through `send(_:to:)`).
    public mutating func add(_ delivery: consuming PlannedDelivery) {
        if case .send = delivery { preconditionFailure("EventPlan.add(.send): a push goes with send(_:to:)") }
        deliveries.append(delivery)
    }

    /// Each delivery, in order, with the index of its push in `pushes` (and in the transport's results,
    /// which follow the pushes), or nil for a skip or a rejection.
    public func forEachDelivery(_ body: (PlannedDelivery, _ pushIndex: Int?) -> Void) {
        var next = 0
        for index in deliveries.indices {
            if case .send = deliveries[index] {
                body(deliveries[index], next)
                next += 1
            } else {
                body(deliveries[index], nil)
            }
        }
    }
}

/// Maps an event to what to send for each of its devices (the rules engine in production).
public protocol NotificationPlanner: Sendable {
    /// `now` is UNIX seconds, for relative expirations when the event has no time of its own.
    /// Throws when the event as a whole cannot be processed; it then goes to the dead-letter topic.
    func plan(_ event: PushEvent, now: Double) throws(PlanningError) -> EventPlan
}

/// Why an event cannot be planned at all (an app without credentials, say): a dead letter.
public struct PlanningError: Error, Sendable {
    /// The dead letter's error class (`invalid_event`, `rule_error`, ...).
    public var errorClass: String
    public var message: String
    public init(errorClass: String, message: String) {
        self.errorClass = errorClass
        self.message = message
    }
}

/// Where results go when they must be written together with the input offsets, atomically
/// (`kafka.exactly_once`: Kafka transactions). It replaces both the ``ResultSink`` and the source's offset
/// storage: a record's results are held until the record and every earlier one of its partition are
/// finished, and then written in one transaction with the offset after them.
public protocol TransactionalResultSink: Sendable {
    /// The most bytes one record may have (key, value and headers); a larger one is replaced by a smaller
    /// dead letter before it is held. Nil: no limit known.
    var maximumRecordBytes: Int? { get }
    /// Holds the results of the record at `offset` of `partition`. `settled` runs once: `true` when they
    /// were committed with an offset past the record, `false` when they were dropped because the partition
    /// was released (its next owner does the record again). Non-blocking.
    func hold(
        _ outputs: [OutboundRecord], partition: TopicPartition, offset: Int64,
        settled: @escaping @Sendable (Bool) -> Void)
    /// Every record of `partition` before `nextOffset` is finished: their held results and this offset go
    /// in the next transaction. Non-blocking.
    func committable(_ partition: TopicPartition, nextOffset: Int64)
    /// Commits what is committable now, by `deadline`; true when it did (or there was nothing to commit).
    func commit(until deadline: ContinuousClock.Instant) async -> Bool
    /// Drops what is held for `partitions` (revoked): their records' `settled` runs with `false`. Waits first
    /// (until `deadline`) for a transaction under way, which may carry their offsets: once this returns, no
    /// offset of theirs is committed any more, so their next owner starts where this one's last commit ended.
    func release(_ partitions: [TopicPartition], waitingUntil deadline: ContinuousClock.Instant) async
    /// Why the sink stopped for good (fenced, a fatal producer error); the worker must stop.
    var failure: String? { get }
}
