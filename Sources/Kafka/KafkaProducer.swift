// The idempotent producer: enqueues with bounded waiting when librdkafka's local queue is full,
// reports each message's delivery, and serves callbacks, flushes and shutdown on its own poll thread.
internal import CRdKafka
import Synchronization

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
    private let client: RDKafkaClient
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
            onFatal: { [core] error in core.state.withLock { $0.fatal = error } }
        )
        client = try RDKafkaClient.make(.producer, properties: properties, callbacks: callbacks)
        self.core = core
        enqueueTimeout = configuration.enqueueTimeout
        queueCapacity = configuration.queueCapacity
        maximumMessageBytes = Self.effectiveMaximumMessageBytes(client.handle)
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
        let started = ContinuousClock.now
        let deadline = enqueueTimeout.map { started.advanced(by: $0) }
        var pause = Duration.milliseconds(1)
        while true {
            // Throws .closed once the producer closes: that is what ends an unbounded wait.
            if try trySend(topic: topic, key: key, value: value, headers: headers, partition: partition,
                           onDelivery: onDelivery) { return }
            if deadline.map({ ContinuousClock.now >= $0 }) ?? false || Task.isCancelled {
                throw KafkaError(
                    code: .queueFull,
                    message: "the producer's local queue (queueCapacity \(queueCapacity) messages) stayed full for "
                        + "\(ContinuousClock.now - started)\(Task.isCancelled ? " (task cancelled)" : ""); "
                        + "the brokers are slow or unreachable, or queueCapacity is too small",
                    librdkafkaCode: RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue, librdkafkaName: "_QUEUE_FULL"
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
        try core.beginEnqueue()
        let core = self.core
        let counted: @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void = { result in
            core.noteDelivery(succeeded: (try? result.get()) != nil)
            onDelivery(result)
        }
        let callback = Unmanaged.passRetained(DeliveryCallback(counted)).toOpaque()
        let failure = Self.produce(
            client.handle, topic: topic, partition: partition ?? RD_KAFKA_PARTITION_UA,
            key: key, value: value, headers: headers, opaque: callback
        )
        core.endEnqueue(accepted: failure == nil)
        guard let failure else { return true }
        Unmanaged<DeliveryCallback>.fromOpaque(callback).release()
        switch rd_kafka_error_code(failure) {
        case RD_KAFKA_RESP_ERR__QUEUE_FULL:
            rd_kafka_error_destroy(failure)
            return false
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
            let size = RecordSize(key: key, value: value, headers: headers)
            throw KafkaError(
                .messageTooLarge,
                "a record of \(size) for topic '\(topic)' is larger than the producer's message.max.bytes "
                    + "(\(maximumMessageBytes) bytes)",
                consuming: failure)
        default:
            throw KafkaError(.produce, "enqueueing a record for topic '\(topic)'", consuming: failure)
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
        return (try? await DedicatedThread.run(name: "kafka-metadata") { () throws(KafkaError) -> [String] in
            topics.compactMap { topic -> String? in
                // The handle stays known to the producer, so the answer fills the cache sends use.
                guard let handle = rd_kafka_topic_new(client.handle, topic, nil) else {
                    return "\(topic): cannot create a topic handle"
                }
                defer { rd_kafka_topic_destroy(handle) }
                var metadata: UnsafePointer<rd_kafka_metadata>?
                let response = rd_kafka_metadata(client.handle, 0, handle, &metadata, milliseconds)
                defer { if let metadata { rd_kafka_metadata_destroy(metadata) } }
                guard response == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                    return "\(topic): metadata request failed: \(String(cString: rd_kafka_err2str(response)))"
                }
                guard metadata.pointee.topic_cnt == 1 else { return "\(topic): not in the metadata answer" }
                let answer = metadata.pointee.topics[0]
                if answer.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    return "\(topic): \(String(cString: rd_kafka_err2str(answer.err)))"
                }
                return nil
            }
        }) ?? []
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

    /// The fatal error the producer hit, or `nil` while it works (`rd_kafka_fatal_error`).
    public var fatalError: KafkaError? {
        core.state.withLock { $0.fatal } ?? client.recordedFatalError
    }

    /// Records enqueued or in flight, not yet reported (`rd_kafka_outq_len`).
    public var queuedMessageCount: Int { Int(rd_kafka_outq_len(client.handle)) }

    /// Records handed to the producer whose delivery report has not come yet, and whether they wait
    /// for the brokers.
    public var status: KafkaProducerStatus { core.currentStatus(now: .now) }

    /// For tests of fatal-error handling: makes librdkafka raise a fabricated fatal error
    /// (`rd_kafka_test_fatal_error`), reported like a real one.
    func raiseFatalErrorForTesting(reason: String) {
        rd_kafka_test_fatal_error(client.handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }

    /// librdkafka's `message.max.bytes` as the client applied it (its default when not configured).
    private static func effectiveMaximumMessageBytes(_ rk: OpaquePointer) -> Int {
        var buffer = [CChar](repeating: 0, count: 32)
        var size = buffer.count
        let found = rd_kafka_conf_get(rd_kafka_conf(rk), "message.max.bytes", &buffer, &size) == RD_KAFKA_CONF_OK
        // librdkafka's documented default, should the lookup ever fail.
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return found ? Int(text) ?? 1_000_000 : 1_000_000
    }

    /// Calls `rd_kafka_produceva`; returns its error, if any. Key, value and headers are copied.
    private static func produce(
        _ rk: OpaquePointer, topic: String, partition: Int32, key: [UInt8]?, value: [UInt8]?,
        headers: [KafkaHeader], opaque: UnsafeMutableRawPointer
    ) -> OpaquePointer? {
        let headerCopies = CHeaderCopies(headers)
        return topic.withCString { topicName in
            withOptionalBytes(key) { keyBytes in
                withOptionalBytes(value) { valueBytes in
                    var arguments: [rd_kafka_vu_t] = []
                    arguments.reserveCapacity(6 + headers.count)
                    var argument = rd_kafka_vu_t()
                    argument.vtype = RD_KAFKA_VTYPE_TOPIC
                    argument.u.cstr = topicName
                    arguments.append(argument)
                    argument = rd_kafka_vu_t()
                    argument.vtype = RD_KAFKA_VTYPE_PARTITION
                    argument.u.i32 = partition
                    arguments.append(argument)
                    argument = rd_kafka_vu_t()
                    argument.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    argument.u.i = RD_KAFKA_MSG_F_COPY
                    arguments.append(argument)
                    if let keyBytes {
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_KEY
                        argument.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyBytes.baseAddress)
                        argument.u.mem.size = keyBytes.count
                        arguments.append(argument)
                    }
                    if let valueBytes {
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_VALUE
                        argument.u.mem.ptr = UnsafeMutableRawPointer(mutating: valueBytes.baseAddress)
                        argument.u.mem.size = valueBytes.count
                        arguments.append(argument)
                    }
                    for header in headerCopies.headers {
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_HEADER
                        argument.u.header.name = UnsafePointer(header.name)
                        argument.u.header.val = header.value.map { UnsafeRawPointer($0) }
                        argument.u.header.size = header.size
                        arguments.append(argument)
                    }
                    argument = rd_kafka_vu_t()
                    argument.vtype = RD_KAFKA_VTYPE_OPAQUE
                    argument.u.ptr = opaque
                    arguments.append(argument)
                    return arguments.withUnsafeBufferPointer { rd_kafka_produceva(rk, $0.baseAddress, $0.count) }
                }
            }
        }
    }
}

/// Calls `body` with the bytes of `bytes` (a non-nil buffer even when empty), or with `nil`.
private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    if bytes.isEmpty {
        // An empty key or value is not the same as none: pass a valid pointer with size 0.
        return withUnsafeTemporaryAllocation(byteCount: 1, alignment: 1) { storage in
            body(UnsafeRawBufferPointer(start: storage.baseAddress, count: 0))
        }
    }
    return bytes.withUnsafeBytes { body($0) }
}

/// C copies of header names and values, alive for one produce call (librdkafka copies them again).
private final class CHeaderCopies {
    struct Header {
        var name: UnsafeMutablePointer<CChar>
        var value: UnsafeMutableRawPointer?
        var size: Int
    }
    let headers: [Header]

    init(_ headers: [KafkaHeader]) {
        self.headers = headers.map { header in
            let utf8 = header.name.utf8CString
            let name = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
            _ = UnsafeMutableBufferPointer(start: name, count: utf8.count).initialize(from: utf8)
            guard let bytes = header.value else { return Header(name: name, value: nil, size: 0) }
            let value = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            bytes.withUnsafeBytes { source in
                value.copyMemory(from: source.baseAddress ?? UnsafeRawPointer(value), byteCount: source.count)
            }
            return Header(name: name, value: value, size: bytes.count)
        }
    }

    deinit {
        for header in headers {
            header.name.deallocate()
            header.value?.deallocate()
        }
    }
}

/// One message's delivery callback, passed to librdkafka as the message opaque (retained once).
final class DeliveryCallback {
    private let onDelivery: @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void

    init(_ onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void) {
        self.onDelivery = onDelivery
    }

    func report(_ message: UnsafePointer<rd_kafka_message_t>) {
        let raw = message.pointee
        let topic = raw.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        if raw.err == RD_KAFKA_RESP_ERR_NO_ERROR {
            onDelivery(.success(KafkaDeliveryReport(
                topic: topic, partition: raw.partition, offset: raw.offset >= 0 ? raw.offset : nil
            )))
        } else if raw.err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE {
            // The broker's limit (its message.max.bytes, or the topic's max.message.bytes) is below the producer's.
            let size = RecordSize(keyBytes: raw.key_len, valueBytes: raw.len)
            onDelivery(.failure(KafkaError(
                .messageTooLarge, "the broker refused a record of \(size) for \(place(topic, raw.partition))",
                response: raw.err)))
        } else {
            onDelivery(.failure(KafkaError(
                .delivery, "delivering a record to \(place(topic, raw.partition))", response: raw.err)))
        }
    }

    private func place(_ topic: String, _ partition: Int32) -> String {
        partition >= 0 ? "\(topic)[\(partition)]" : "topic '\(topic)'"
    }
}

/// How large a record is, for the messages of ``KafkaError/Code/messageTooLarge``.
struct RecordSize: CustomStringConvertible {
    var keyBytes: Int
    var valueBytes: Int
    var headerBytes: Int?

    init(keyBytes: Int, valueBytes: Int, headerBytes: Int? = nil) {
        self.keyBytes = keyBytes
        self.valueBytes = valueBytes
        self.headerBytes = headerBytes
    }

    init(key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        self.init(
            keyBytes: key?.count ?? 0, valueBytes: value?.count ?? 0,
            headerBytes: headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) })
    }

    var description: String {
        let total = keyBytes + valueBytes + (headerBytes ?? 0)
        let parts = "key \(keyBytes), value \(valueBytes)" + (headerBytes.map { ", headers \($0)" } ?? "")
        return "\(total) bytes (\(parts))"
    }
}

/// A delivery result that may arrive before or after someone waits for it.
private final class DeliveryPromise: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>?)
        case done(Result<KafkaDeliveryReport, KafkaError>)
    }
    private let state = Mutex(State.waiting(nil))

    func fulfill(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        let waiter: CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>? = state.withLock { state in
            guard case .waiting(let waiter) = state else { return nil }
            state = .done(result)
            return waiter
        }
        waiter?.resume(returning: result)
    }

    var result: Result<KafkaDeliveryReport, KafkaError> {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Result<KafkaDeliveryReport, KafkaError>? = state.withLock { state in
                    switch state {
                    case .done(let result): return result
                    case .waiting: state = .waiting(continuation); return nil
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

/// What a producer's records are doing: how many wait for their delivery report, and whether they
/// wait for the brokers (none acknowledged for longer than the configured threshold).
public struct KafkaProducerStatus: Sendable, Equatable, CustomStringConvertible {
    /// Records handed to the producer (enqueued) whose delivery report has not come yet.
    public var unacknowledged: Int
    /// Whether records have gone unacknowledged, with none acknowledged, for longer than the
    /// producer's `acknowledgementWaitThreshold`.
    public var isWaitingForBrokers: Bool
    /// While waiting: how long since the last acknowledgement (or since the first of the waiting
    /// records was enqueued, if later).
    public var waitingFor: Duration?
    /// librdkafka's last connection error since the last acknowledgement, if any.
    public var cause: String?

    public var description: String {
        guard isWaitingForBrokers else { return "\(unacknowledged) records unacknowledged" }
        let seconds = Double((waitingFor ?? .zero).wholeMilliseconds) / 1000
        return "\(unacknowledged) records unacknowledged for \(seconds) s" + (cause.map { " (\($0))" } ?? "")
    }
}

/// Receives a producer's status when its records start waiting for the brokers and when they are
/// acknowledged again, on the producer's poll thread. It must return quickly.
public typealias KafkaProducerStatusHandler = @Sendable (KafkaProducerStatus) -> Void

/// The producer's shared state behind one lock, and its poll loop.
final class ProducerCore: Sendable {
    enum Lifecycle { case running, closing, closed }

    struct State {
        var lifecycle = Lifecycle.running
        var fatal: KafkaError?
        /// Sends inside `rd_kafka_produceva` right now; shutdown waits for them before purging.
        var activeEnqueues = 0
        var flushRequests: [(timeout: Duration, continuation: CheckedContinuation<KafkaError?, Never>)] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        /// Records enqueued (or being enqueued) without a delivery report yet.
        var unacknowledged = 0
        /// The last acknowledgement, or the enqueue that ended a time with nothing unacknowledged.
        var lastProgress = ContinuousClock.now
        /// Whether a delivery failed since the last acknowledgement: records failed by a delivery timeout
        /// and sent again have waited all along, so the enqueue of those does not restart the clock.
        var failedSinceProgress = false
        var isWaiting = false
        var lastConnectionError: String?
    }

    let state = Mutex(State())
    let waitThreshold: Duration
    let statusHandler: KafkaProducerStatusHandler?

    init(waitThreshold: Duration = .seconds(5), statusHandler: KafkaProducerStatusHandler? = nil) {
        self.waitThreshold = waitThreshold
        self.statusHandler = statusHandler
    }

    func beginEnqueue() throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            if let fatal = state.fatal { throw fatal }
            guard state.lifecycle == .running else {
                throw KafkaError(code: .closed, message: "the producer is closed")
            }
            state.activeEnqueues += 1
            // Counted before librdkafka holds it: its report may come before produceva returns.
            if state.unacknowledged == 0, !state.failedSinceProgress { state.lastProgress = .now }
            state.unacknowledged += 1
        }
    }

    func endEnqueue(accepted: Bool) {
        state.withLock { state in
            state.activeEnqueues -= 1
            if !accepted { state.unacknowledged -= 1 }
        }
    }

    // MARK: Status

    func currentStatus(now: ContinuousClock.Instant) -> KafkaProducerStatus {
        state.withLock { Self.status(of: $0, now: now) }
    }

    private static func status(of state: State, now: ContinuousClock.Instant) -> KafkaProducerStatus {
        KafkaProducerStatus(
            unacknowledged: state.unacknowledged, isWaitingForBrokers: state.isWaiting,
            waitingFor: state.isWaiting ? now - state.lastProgress : nil,
            cause: state.isWaiting ? state.lastConnectionError : nil)
    }

    /// Counts a delivery report; a success while records waited ends the wait. On the poll thread.
    func noteDelivery(succeeded: Bool) {
        let now = ContinuousClock.now
        let ended: KafkaProducerStatus? = state.withLock { state in
            state.unacknowledged -= 1
            guard succeeded else {
                state.failedSinceProgress = true
                return nil
            }
            state.lastProgress = now
            state.failedSinceProgress = false
            state.lastConnectionError = nil
            guard state.isWaiting else { return nil }
            state.isWaiting = false
            return Self.status(of: state, now: now)
        }
        if let ended { statusHandler?(ended) }
    }

    private static let connectionErrors: Set<Int32> = Set([
        RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__RESOLVE, RD_KAFKA_RESP_ERR__SSL,
        RD_KAFKA_RESP_ERR__AUTHENTICATION, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
    ].map(\.rawValue))

    /// Keeps librdkafka's last connection error, the likely cause of a wait.
    func noteClientError(_ error: KafkaError) {
        guard let code = error.librdkafkaCode, Self.connectionErrors.contains(code) else { return }
        state.withLock { $0.lastConnectionError = error.message }
    }

    /// Starts a wait when records went unacknowledged for the threshold (only an acknowledgement ends it:
    /// records failed by a delivery timeout leave nothing unacknowledged until they are sent again).
    /// On the poll thread, after each poll.
    func checkWaiting() {
        let now = ContinuousClock.now
        let changed: KafkaProducerStatus? = state.withLock { state in
            guard !state.isWaiting, state.unacknowledged > 0,
                now - state.lastProgress >= waitThreshold
            else {
                return nil
            }
            state.isWaiting = true
            return Self.status(of: state, now: now)
        }
        if let changed { statusHandler?(changed) }
    }

    func requestFlush(timeout: Duration, client: RDKafkaClient,
                      continuation: CheckedContinuation<KafkaError?, Never>) {
        let accepted = state.withLock { state in
            guard state.lifecycle == .running else { return false }
            state.flushRequests.append((timeout, continuation))
            return true
        }
        if accepted {
            rd_kafka_yield(client.handle)  // wake the poll thread
        } else {
            continuation.resume(returning: KafkaError(code: .closed, message: "the producer is closed"))
        }
    }

    func requestClose(client: RDKafkaClient, continuation: CheckedContinuation<Void, Never>? = nil) {
        let closed = state.withLock { state in
            if state.lifecycle == .closed { return true }
            state.lifecycle = .closing
            if let continuation { state.closeWaiters.append(continuation) }
            return false
        }
        if closed {
            continuation?.resume()
        } else {
            rd_kafka_yield(client.handle)
        }
    }

    static func pollLoop(client: RDKafkaClient, core: ProducerCore) {
        let rk = client.handle
        while true {
            rd_kafka_poll(rk, 100)
            core.checkWaiting()
            let (flushes, closing) = core.state.withLock { state in
                defer { state.flushRequests = [] }
                return (state.flushRequests, state.lifecycle != .running)
            }
            for request in flushes {
                // rd_kafka_flush serves delivery reports on this thread while it waits.
                let response = rd_kafka_flush(rk, Int32(clamping: request.timeout.wholeMilliseconds))
                if response == RD_KAFKA_RESP_ERR_NO_ERROR {
                    request.continuation.resume(returning: nil)
                } else {
                    request.continuation.resume(returning: KafkaError(
                        code: .timeout,
                        message: "flush: \(rd_kafka_outq_len(rk)) records still undelivered after \(request.timeout)",
                        librdkafkaCode: response.rawValue, librdkafkaName: String(cString: rd_kafka_err2name(response))
                    ))
                }
            }
            if closing { break }
        }
        // No new sends start now; let those inside produceva finish, then fail whatever is left so
        // every delivery callback runs exactly once.
        while core.state.withLock({ $0.activeEnqueues }) > 0 { rd_kafka_poll(rk, 1) }
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        repeat {
            rd_kafka_purge(rk, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            rd_kafka_poll(rk, 50)
        } while rd_kafka_outq_len(rk) > 0 && ContinuousClock.now < deadline
        let waiters = core.state.withLock { state in
            state.lifecycle = .closed
            defer { state.closeWaiters = [] }
            return state.closeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
