// The idempotent producer: enqueues with bounded waiting when librdkafka's local queue is full,
// reports each message's delivery, and serves callbacks, flushes and shutdown on its own poll thread.

/// A Kafka producer, idempotent by default.
///
/// ```swift
/// let producer = try KafkaProducer(configuration: config)
/// let report = try await producer.send(topic: "push.outcomes", key: key, value: json)
/// try await producer.close(timeout: .seconds(10))
/// ```
///
/// - Important: Threading. librdkafka's callbacks (delivery reports, errors, statistics) run on a
///   thread the producer owns; `onDelivery` closures run there and must return quickly. All methods
///   may be called from any task; none blocks a thread of Swift's cooperative pool.
///
/// Backpressure: when librdkafka's local queue (`queueCapacity` messages) is full, `send` waits
/// (sleeping 1 to 50 ms between attempts) for room: until the producer closes, or at most
/// `enqueueTimeout` when one is set, then throws ``KafkaError/Code/queueFull``.
///
/// Outages: by default librdkafka retries a record until a broker takes it, so a broker outage makes
/// records wait, not fail. ``status`` (and the `statusHandler`, once per change) says when records have
/// gone unacknowledged for longer than `acknowledgementWaitThreshold`, and when they are acknowledged again.
/// ``KafkaError/producerFailureKind`` tells a failure that passes from one that does not.
///
/// A record larger than the producer takes (``maximumMessageBytes``) is refused at enqueue, and one
/// larger than the broker takes fails in its delivery report; both with ``KafkaError/Code/messageTooLarge``.
///
/// Fatal errors (for example when the idempotence guarantee cannot be kept) are reported to the
/// event handler as ``KafkaEvent/fatal(_:)``, are readable as ``fatalError``, and make every later
/// send throw; the producer must then be recreated.
public final class KafkaProducer: Sendable {
    let client: RDKafkaClient
    private let core: ProducerCore
    private let enqueueTimeout: Duration?
    private let queueCapacity: Int
    /// The largest record the producer enqueues (librdkafka's effective `message.max.bytes`: the key, the
    /// value, the headers and a small framing overhead count against it), in bytes.
    public let maximumMessageBytes: Int

    /// Creates the producer and starts its poll thread.
    /// - Parameter statusHandler: told on the poll thread when records start waiting for the brokers and
    ///   when they are acknowledged again (see ``KafkaProducerStatus``); it must return quickly.
    /// - Throws: ``KafkaError/Code/invalidConfiguration`` naming every rejected property.
    public init(
        configuration: KafkaProducerConfiguration, eventHandler: KafkaEventHandler? = nil,
        statusHandler: KafkaProducerStatusHandler? = nil
    ) throws(KafkaError) {
        let core = ProducerCore(
            waitThreshold: configuration.acknowledgementWaitThreshold, statusHandler: statusHandler)
        let properties = configuration.librdkafkaProperties()
        let observingHandler: KafkaEventHandler = { [core] event in
            if case .error(let error) = event { core.noteClientError(error) }
            eventHandler?(event)
        }
        let callbacks = RDKafkaCallbacks(
            eventHandler: observingHandler, redactor: SecretRedactor(properties: properties),
            onFatal: { [core] error in core.noteFatal(error) },
            onDelivery: { [core] succeeded in core.noteDelivery(succeeded: succeeded) }
        )
        client = try RDKafkaClient.make(.producer, properties: properties, callbacks: callbacks)
        self.core = core
        enqueueTimeout = configuration.enqueueTimeout
        queueCapacity = configuration.queueCapacity
        // librdkafka's documented default, should the look-up ever fail.
        maximumMessageBytes = client.appliedProperty("message.max.bytes").flatMap { Int($0) } ?? 1_000_000
        DedicatedThread.start(name: "kafka-producer") { [client, core] in
            ProducerCore.pollLoop(client: client, core: core)
        }
    }

    deinit {
        // Without close(), undelivered messages are purged and their reports fail.
        core.requestClose(client: client)
    }

    /// Sends one record and waits until the broker acknowledged it (or delivery failed).
    ///
    /// - Parameters:
    ///   - key: the record key; `nil` for none. Records with one key go to one partition.
    ///   - value: the payload; `nil` for a tombstone.
    ///   - partition: a fixed partition; `nil` lets the partitioner choose from the key.
    /// - Throws: ``KafkaError/Code/queueFull``, ``KafkaError/Code/messageTooLarge``, ``KafkaError/Code/produce``,
    ///   ``KafkaError/Code/delivery``, ``KafkaError/Code/fatal`` or ``KafkaError/Code/closed``. Cancelling the
    ///   task does not withdraw a record that was already enqueued; the call still waits for its report.
    public func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil
    ) async throws(KafkaError) -> KafkaDeliveryReport {
        let promise = DeliveryPromise()
        try await send(topic: topic, key: key, value: value, headers: headers, partition: partition) { result in
            promise.fulfill(result)
        }
        return try await promise.result.get()
    }

    /// Enqueues one record and returns once librdkafka holds it; `onDelivery` is called exactly once,
    /// on the producer's poll thread, with where it landed or why it failed. For the hot path.
    ///
    /// Waits (without blocking a thread) while the local queue is full: until the producer closes, or at
    /// most `enqueueTimeout` when one is configured.
    /// - Throws: ``KafkaError/Code/queueFull``, ``KafkaError/Code/messageTooLarge``, ``KafkaError/Code/produce``,
    ///   ``KafkaError/Code/fatal`` or ``KafkaError/Code/closed``; `onDelivery` is not called when this throws.
    public func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) async throws(KafkaError) {
        try await send(
            topic: topic, key: key, value: value, headers: headers, partition: partition,
            delivery: ClosureDelivery(onDelivery))
    }

    /// ``send(topic:key:value:headers:partition:onDelivery:)`` with a delivery object instead of a closure
    /// (see ``KafkaDelivery``): `delivery` hears exactly once, unless this throws.
    public func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        delivery: KafkaDelivery
    ) async throws(KafkaError) {
        let started = ContinuousClock.now
        let deadline = enqueueTimeout.map { started.advanced(by: $0) }
        var pause = Duration.milliseconds(1)
        while true {
            // Throws .closed once the producer closes: that is what ends an unbounded wait.
            if try trySend(
                topic: topic, key: key, value: value, headers: headers, partition: partition, delivery: delivery)
            {
                return
            }
            if deadline.map({ ContinuousClock.now >= $0 }) ?? false || Task.isCancelled {
                throw KafkaError(
                    code: .queueFull,
                    message: "the producer's local queue (queueCapacity \(queueCapacity) messages) stayed full for "
                        + "\(ContinuousClock.now - started)\(Task.isCancelled ? " (task cancelled)" : ""); "
                        + "the brokers are slow or unreachable, or queueCapacity is too small",
                    librdkafkaCode: RDKafkaResponse.queueFull.rawValue, librdkafkaName: "_QUEUE_FULL"
                )
            }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// Enqueues one record if librdkafka's local queue has room, without waiting: the hot path of a
    /// caller that is not in a task (a delivery callback), which then waits only when this returns false.
    ///
    /// - Returns: true when librdkafka holds the record (`onDelivery` will be called exactly once, on the
    ///   producer's poll thread); false when the local queue is full (`onDelivery` is not called).
    /// - Throws: ``KafkaError/Code/messageTooLarge``, ``KafkaError/Code/produce``, ``KafkaError/Code/fatal``
    ///   or ``KafkaError/Code/closed``; `onDelivery` is not called when this throws.
    public func trySend(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) -> Bool {
        try trySend(
            topic: topic, key: key, value: value, headers: headers, partition: partition,
            delivery: ClosureDelivery(onDelivery))
    }

    /// ``trySend(topic:key:value:headers:partition:onDelivery:)`` with a delivery object instead of a closure
    /// (see ``KafkaDelivery``): when this returns true, `delivery` hears exactly once, on the poll thread.
    public func trySend(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        delivery: KafkaDelivery
    ) throws(KafkaError) -> Bool {
        try core.beginEnqueue()
        let result = client.produce(
            topic: topic, partition: partition, key: key, value: value, headers: headers, delivery: delivery)
        switch result {
        case .enqueued:
            core.endEnqueue(accepted: true)
            return true
        case .queueFull:
            core.endEnqueue(accepted: false)
            return false
        case .refused(let response, let reason):
            core.endEnqueue(accepted: false)
            if response == .messageSizeTooLarge {
                let size = RecordSize(key: key, value: value, headers: headers)
                throw KafkaError(
                    .messageTooLarge,
                    "a record of \(size) for topic '\(topic)' is larger than the producer's message.max.bytes "
                        + "(\(maximumMessageBytes) bytes)",
                    response: response, reason: reason)
            }
            throw KafkaError(.produce, "enqueueing a record for topic '\(topic)'", response: response, reason: reason)
        }
    }

    /// Learns the partitions and leaders of `topics` and connects to their brokers before the first
    /// record is sent, at most `timeout` per topic.
    ///
    /// Without it, librdkafka looks a topic up only when the first record for it arrives, and that
    /// record (with everything sent after it) waits for the lookup: about a second on a fresh producer.
    /// Returns one line per topic that could not be looked up, for the caller to log; records for
    /// such a topic still wait for librdkafka's own retries.
    public func prepare(topics: [String], timeout: Duration) async -> [String] {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        return
            (try? await DedicatedThread.run(name: "kafka-metadata") { () throws(KafkaError) -> [String] in
                topics.compactMap { topic -> String? in
                    client.lookUpTopic(topic, milliseconds: milliseconds).map { "\(topic): \($0)" }
                }
            }) ?? []
    }

    /// A librdkafka property's value as the producer applied it (its default when not configured), for
    /// example `linger.ms`; nil for a name librdkafka does not know.
    public func appliedProperty(_ name: String) -> String? {
        client.appliedProperty(name)
    }

    /// Creates topics on the cluster (Kafka's CreateTopics), each with its partitions and replication factor,
    /// waiting at most `timeout` for the answer. For tools that set up a broker of their own; the worker
    /// never creates topics.
    /// - Throws: ``KafkaError/Code/query`` naming each topic the cluster refused and why (one that already
    ///   exists included), or ``KafkaError/Code/timeout``.
    public func createTopics(
        _ topics: [(name: String, partitions: Int, replicationFactor: Int)], timeout: Duration
    ) async throws(KafkaError) {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        let refused = try await DedicatedThread.run(name: "kafka-admin") { () throws(KafkaError) -> [String] in
            try client.createTopics(topics, milliseconds: milliseconds)
        }
        guard refused.isEmpty else {
            throw KafkaError(code: .query, message: "the cluster refused to create " + refused.joined(separator: "; "))
        }
    }

    /// Waits until every enqueued record has a delivery report, at most `timeout`.
    /// - Throws: ``KafkaError/Code/timeout`` saying how many records are still undelivered.
    public func flush(timeout: Duration) async throws(KafkaError) {
        let result: KafkaError? = await withCheckedContinuation { continuation in
            core.requestFlush(timeout: timeout, client: client, continuation: continuation)
        }
        if let result { throw result }
    }

    /// Flushes for at most `timeout`, then stops the producer: records still undelivered are purged
    /// and their reports fail. Waits for the poll thread to finish; safe to call more than once.
    /// - Throws: the flush's ``KafkaError/Code/timeout`` if records had to be purged.
    public func close(timeout: Duration) async throws(KafkaError) {
        var flushError: KafkaError?
        do { try await flush(timeout: timeout) } catch { flushError = error }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.requestClose(client: client, continuation: continuation)
        }
        if let flushError, flushError.code != .closed { throw flushError }
    }

    /// The fatal error the producer hit, or `nil` while it works (as librdkafka recorded it).
    public var fatalError: KafkaError? {
        core.state.withLock { $0.fatal } ?? client.recordedFatalError
    }

    /// librdkafka's out-queue length: records enqueued or in flight and not yet reported, plus delivery
    /// reports and other callbacks (errors, statistics) not served yet. For records alone, see
    /// ``status``'s `unacknowledged`.
    public var queuedMessageCount: Int { client.outQueueLength }

    /// Records handed to the producer whose delivery report has not come yet, and whether they wait
    /// for the brokers.
    public var status: KafkaProducerStatus { core.currentStatus(now: .now) }

    /// For tests of fatal-error handling: makes librdkafka raise a fabricated fatal error, reported
    /// like a real one.
    func raiseFatalErrorForTesting(reason: String) {
        client.raiseFatalErrorForTesting(reason: reason)
    }
}
