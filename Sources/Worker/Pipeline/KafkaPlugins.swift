// The production edges of the pipeline on Kafka: a group consumer as the EventSource and the
// idempotent producer as the ResultSink. Only translation lives here; Kafka semantics live in
// the Kafka module.

public import Kafka
import Synchronization

/// Consumes the requests topic in a consumer group and hands records to the pipeline.
///
/// Shutdown: after ``prepareShutdown(_:)``, a revoke waits no longer than the drain, and ``close()``
/// commits and leaves the group within the shutdown's deadlines (see ``closeOutcome``).
public final class KafkaEventSource: EventSource {
    let consumer: KafkaConsumer
    let topics: [String]
    let reader = Mutex<Task<Void, Never>?>(nil)
    let handlerSlot = HandlerSlot()
    /// The pipeline's pause and resume; see `DeliveryGate` for why it is not librdkafka's.
    let gate = DeliveryGate()
    /// Called with errors worth logging (a store for a partition just revoked, a failed commit).
    let report: @Sendable (String) -> Void
    let shutdown = Mutex<ShutdownDeadline?>(nil)
    let closed = Mutex<SourceCloseOutcome?>(nil)

    /// - Parameters:
    ///   - configuration: the consumer's settings (the worker's properties already applied).
    ///   - statusHandler: told when brokers become unreachable or reachable and when group membership is
    ///     lost or regained (see `KafkaConsumerStatus`), on the consumer's poll thread.
    ///   - rebalanceObserver: told about every assignment change before the pipeline handles it.
    ///   - report: told about non-fatal problems, for the log.
    public init(
        configuration: KafkaConsumerConfiguration, topics: [String], eventHandler: KafkaEventHandler? = nil,
        statusHandler: KafkaConsumerStatusHandler? = nil,
        rebalanceObserver: (@Sendable (KafkaRebalanceEvent) -> Void)? = nil,
        report: @escaping @Sendable (String) -> Void
    ) throws(KafkaError) {
        let handlerSlot = self.handlerSlot
        let gate = self.gate
        consumer = try KafkaConsumer(
            configuration: configuration,
            rebalanceHandler: { event in
                rebalanceObserver?(event)
                guard let handler = handlerSlot.handler else { return }
                switch event {
                case .assigned(let partitions):
                    handler.assigned(partitions.map(TopicPartition.init))
                case .revoked(let revocation):
                    let partitions = revocation.partitions.map(TopicPartition.init)
                    gate.revoked(partitions)
                    await handler.revoking(partitions, deadline: revocation.deadline)
                }
            },
            eventHandler: eventHandler, statusHandler: statusHandler)
        self.topics = topics
        self.report = report
    }

    public func start(handler: any SourceHandler) throws {
        handlerSlot.handler = handler
        try consumer.subscribe(topics: topics)
        let messages = consumer.messages
        let report = self.report
        let gate = self.gate
        let task = Task {
            do {
                for try await message in messages {
                    let record = SourceRecord(message)
                    guard await gate.admit(record.topicPartition) else {
                        if Task.isCancelled { break }
                        continue
                    }
                    handler.received(record)
                }
            } catch {
                report("the consumer stopped: \(error)")
            }
        }
        reader.withLock { $0 = task }
    }

    public func store(_ partition: TopicPartition, nextOffset: Int64) {
        do {
            try consumer.storeOffset(topic: partition.topic, partition: partition.partition, nextOffset: nextOffset)
        } catch {
            // A partition revoked meanwhile: its next owner redoes the record (at-least-once).
            report("offset \(nextOffset) of \(partition) not stored: \(error)")
        }
    }

    public func isCurrent(_ record: SourceRecord) -> Bool {
        consumer.isCurrent(KafkaTopicPartition(record.topicPartition), assignment: record.assignment)
    }

    public func pause(_ partitions: [TopicPartition]) {
        gate.close(partitions)
    }

    public func resume(_ partitions: [TopicPartition]) {
        gate.open(partitions)
    }

    public func stopFetching(_ partitions: [TopicPartition]) {
        try? consumer.pause(partitions.map(KafkaTopicPartition.init))
    }

    public func resumeFetching(_ partitions: [TopicPartition]) {
        for partition in partitions {
            try? consumer.resume([KafkaTopicPartition(partition)])
        }
    }

    public func stopReceiving() {
        _ = try? consumer.pauseAll()
        reader.withLock { $0?.cancel() }
        gate.shutDown()
    }

    /// Bounds what follows by `deadline`: a revoke under way or to come waits no longer than the
    /// drain, and ``close()`` commits by its `commitEnds` and leaves the group by its `closeEnds`.
    public func prepareShutdown(_ deadline: ShutdownDeadline) {
        shutdown.withLock { $0 = deadline }
        consumer.limitRevocations(until: deadline.drainEnds)
    }

    /// Commits what was stored (synchronously), then leaves the group. After ``prepareShutdown(_:)``
    /// each step ends by its deadline, a close that cannot finish is abandoned, and ``closeOutcome``
    /// says how it went; it throws only what closing without a deadline throws.
    public func close() async throws {
        gate.shutDown()
        guard let deadline = shutdown.withLock({ $0 }) else {
            try await consumer.close()
            return
        }
        var outcome = SourceCloseOutcome()
        do {
            try await consumer.commit(deadline: deadline.commitEnds)
        } catch {
            outcome.commitProblem = "\(error)"
        }
        do {
            try await consumer.close(deadline: deadline.closeEnds)
        } catch {
            outcome.closeProblem = "\(error)"
            outcome.closeAbandoned = error.code == .timeout
        }
        closed.withLock { $0 = outcome }
    }

    /// How the last bounded ``close()`` went; nil before it.
    public var closeOutcome: SourceCloseOutcome? { closed.withLock { $0 } }

    /// What the consumer knows of its brokers and its group.
    public var status: KafkaConsumerStatus { consumer.status }

    /// Records behind the high watermark, per assigned partition.
    public func lags() -> [(TopicPartition, Int64)] {
        ((try? consumer.partitionLags()) ?? []).compactMap { lag in
            guard let position = lag.position, let high = lag.highWatermark else { return nil }
            return (TopicPartition(lag.topicPartition), max(0, high - position))
        }
    }
}

/// How a bounded close of a ``KafkaEventSource`` went.
public struct SourceCloseOutcome: Sendable {
    /// Why the final commit failed or got no answer in time (what finished since the last commit is
    /// then redelivered to the group).
    public var commitProblem: String?
    /// Why leaving the group failed, or where it was stuck when it was abandoned.
    public var closeProblem: String?
    /// Whether the close did not finish by its deadline and was left running.
    public var closeAbandoned = false
}

/// The pipeline, once started; the rebalance callback exists before it does.
final class HandlerSlot: Sendable {
    private let slot = Mutex<(any SourceHandler)?>(nil)
    var handler: (any SourceHandler)? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}

/// Publishes results with the idempotent producer; acknowledgements are its delivery reports.
///
/// A failure that passes (``KafkaError/producerFailureKind`` `.transient`: the brokers were away) is never
/// acknowledged as a failure: the record is sent again until Kafka takes it or the producer closes, so
/// that an outage holds the record's offset instead of stopping the worker. Only failures that would
/// recur, and records purged by the closing producer, reach the pipeline as failures.
public final class KafkaResultSink: ResultSink {
    let producer: KafkaProducer
    /// Told, once per refused record, why a record was too large for Kafka (for the log).
    let report: @Sendable (String) -> Void
    /// Pause before sending again a record whose delivery failed while the brokers were away; librdkafka
    /// has already waited its whole `message.timeout.ms` by then, so this only keeps a loop from spinning.
    static let resendPause = Duration.milliseconds(500)
    private let outstanding = Atomic<Int>(0)

    /// Records published and not acknowledged yet (in librdkafka's queue, waiting for room in it, or
    /// waiting to be sent again after a delivery timeout): what `apns_worker_results_unacknowledged` shows.
    public var unacknowledged: Int { outstanding.load(ordering: .relaxed) }

    /// - Parameter report: told about each record Kafka refused as too large (the smaller dead letters
    ///   the pipeline publishes in their place are not reported again).
    public init(producer: KafkaProducer, report: @escaping @Sendable (String) -> Void = { _ in }) {
        self.producer = producer
        self.report = report
    }

    public func publish(_ record: OutboundRecord, acknowledged: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        publish([record]) { _, result in acknowledged(result) }
    }

    public func publish(
        _ records: [OutboundRecord], acknowledged: @escaping @Sendable (_ index: Int, Result<Void, any Error>) -> Void
    ) {
        outstanding.add(records.count, ordering: .relaxed)
        for index in records.indices {
            send(records[index], ResultDelivery(sink: self, index: index, acknowledged: acknowledged))
        }
    }

    /// Hands the record to librdkafka, its delivery object as the message's opaque: one object per record.
    /// librdkafka copies the record; the delivery keeps none, so the caller's copy is freed on the event
    /// loop that made it, and a failed report brings librdkafka's copy back.
    fileprivate func send(_ record: OutboundRecord, _ delivery: ResultDelivery) {
        let headers = record.headers.map { KafkaHeader($0) }
        // Enqueued at once when librdkafka's queue has room (the common case: no task per record); only a
        // full queue makes a task that waits for room, until there is some or the producer closes.
        do throws(KafkaError) {
            if try producer.trySend(
                topic: record.topic, key: record.key, value: record.value, headers: headers, delivery: delivery)
            {
                return
            }
        } catch {
            delivery.finish(.failure(translated(error, record)))
            return
        }
        let producer = self.producer
        Task {
            do throws(KafkaError) {
                try await producer.send(
                    topic: record.topic, key: record.key, value: record.value, headers: headers, delivery: delivery)
            } catch {
                delivery.finish(.failure(translated(error, record)))
            }
        }
    }

    /// Called once per record, when its delivery is final.
    fileprivate func acknowledgedOne() {
        outstanding.subtract(1, ordering: .relaxed)
    }

    /// A size refusal becomes the pipeline's ``RecordTooLargeError`` (reported unless the record already is
    /// the smaller form of another); every other error passes unchanged.
    fileprivate func translated(_ error: KafkaError, _ record: OutboundRecord) -> any Error {
        guard error.code == .messageTooLarge else { return error }
        let refusal = RecordTooLargeError(
            record: record, limitBytes: producer.maximumMessageBytes, detail: error.description)
        if !DeadLetterHeader.isReducedDeadLetter(record) {
            report(
                "a record for \(record.topic) is too large for Kafka\(DeadLetterHeader.sourceText(of: record)): "
                    + "\(refusal.detail); a smaller dead letter replaces it")
        }
        return refusal
    }

    public func flush(timeout: Double) async -> Bool {
        do {
            try await producer.flush(timeout: .milliseconds(Int(timeout * 1000)))
            return true
        } catch {
            return false
        }
    }
}

/// One result record on its way to Kafka: librdkafka holds it as the message's opaque and hands it back
/// with the delivery report, on the producer's poll thread. It holds no copy of the record: librdkafka's
/// copy comes back with a failed report, the only one that needs it.
private final class ResultDelivery: KafkaDelivery, @unchecked Sendable {
    let sink: KafkaResultSink
    /// The record's index among its source record's results, for `acknowledged`.
    let index: Int
    let acknowledged: @Sendable (_ index: Int, Result<Void, any Error>) -> Void

    init(
        sink: KafkaResultSink, index: Int,
        acknowledged: @escaping @Sendable (_ index: Int, Result<Void, any Error>) -> Void
    ) {
        self.sink = sink
        self.index = index
        self.acknowledged = acknowledged
    }

    override func delivered(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        switch result {
        case .success:
            finish(.success(()))
        case .failure(let error):
            // librdkafka's failed reports come to `failed(_:record:)`, with the record; this is for any other.
            finish(.failure(error))
        }
    }

    override func failed(_ error: KafkaError, record copy: KafkaUndeliveredRecord) {
        let record = OutboundRecord(
            topic: copy.topic, key: copy.key, value: copy.value,
            headers: copy.headers.map { RecordHeader($0) })
        guard error.producerFailureKind == .transient else {
            finish(.failure(sink.translated(error, record)))
            return
        }
        // librdkafka gave up after a finite message.timeout.ms while the brokers were away; librdkafka has
        // consumed this object, so the record goes again with a fresh one.
        let again = ResultDelivery(sink: sink, index: index, acknowledged: acknowledged)
        Task {
            try? await Task.sleep(for: KafkaResultSink.resendPause)
            again.sink.send(record, again)
        }
    }

    /// The record's final answer: it stops counting as unacknowledged, and its source record hears.
    func finish(_ result: Result<Void, any Error>) {
        sink.acknowledgedOne()
        acknowledged(index, result)
    }
}

extension TopicPartition {
    init(_ partition: KafkaTopicPartition) { self.init(topic: partition.topic, partition: partition.partition) }
}

extension KafkaTopicPartition {
    init(_ partition: TopicPartition) { self.init(topic: partition.topic, partition: partition.partition) }
}

extension RecordHeader {
    init(_ header: KafkaHeader) { self.init(name: header.name, value: header.value) }
}

extension KafkaHeader {
    init(_ header: RecordHeader) { self.init(name: header.name, value: header.value) }
}

extension SourceRecord {
    init(_ message: KafkaConsumerMessage) {
        self.init(
            topic: message.topic, partition: message.partition, offset: message.offset, key: message.key,
            value: message.value, headers: message.headers.map { RecordHeader($0) },
            timestamp: message.timestamp.map { Double($0.millisecondsSince1970) / 1000 })
        assignment = message.assignment
    }
}
