// The pipeline: decode → plan (rules) → send (with retries) → publish results → store the offset
// once the record and every earlier record of its partition are finished. At-least-once: a
// record is finished only when every result it produced is acknowledged by the sink.
import APNs
import Synchronization

import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Settings of the pipeline itself; Kafka and APNs settings live with their plug-ins.
public struct PipelineConfiguration: Sendable {
    /// Default: `push.outcomes`.
    public var outcomesTopic = "push.outcomes"
    /// Default: `push.invalid-tokens`.
    public var invalidTokensTopic = "push.invalid-tokens"
    /// Default: `push.dlq`.
    public var deadLetterTopic = "push.dlq"
    /// Where records wait whose pushes APNs refused for their credential, not for themselves; the source
    /// consumes it too. Default: `push.retry`.
    public var retryTopic = "push.retry"
    /// How long a parked record waits before it is tried again (seconds). Default: `30`.
    public var parkDelay: Double = 30
    /// Records in flight (taken, not finished) at which consumption pauses; also the most records one
    /// partition may hold before it stops fetching (taken and not committable: finished ones waiting
    /// behind a slow one count, since a crash would redo them). Default: `1000`.
    public var maxRecordsInFlight = 1000
    /// Records in flight at or below which consumption resumes. Default: half the cap.
    public var resumeBelow: Int?
    /// How long a revoke waits for in-flight records of the revoked partitions (seconds). Default: `10`.
    public var revokeTimeout: Double = 10

    public init() {}
}

/// Counts of what the pipeline did, for summaries and tests.
public struct PipelineCounters: Sendable, Equatable {
    public var recordsTaken = 0
    public var recordsFinished = 0
    public var deadLettered = 0
    /// Records that went to the retry topic (some or all of their pushes waiting for a credential).
    public var parked = 0
    public var outcomes = 0
    public var invalidTokens = 0
    public var byStatus: [OutcomeStatus: Int] = [:]
    public var abandonedAtRevoke = 0
    public var publishFailures = 0
}

/// Observes results as they are published (the `dev` command prints them; metrics count them).
public protocol PipelineObserver: Sendable {
    func recordReceived(_ record: SourceRecord)
    func outcomePublished(_ outcome: OutcomeRecord, eventTime: Double?)
    func deadLettered(_ record: SourceRecord, errorClass: String, message: String)
    func flowChanged(paused: Bool, partitions: [TopicPartition])
    /// A record's pushes that APNs refused for their credential went to the retry topic.
    func parked(_ record: SourceRecord, devices: Int, reason: String)
}

extension PipelineObserver {
    public func recordReceived(_ record: SourceRecord) {}
    public func outcomePublished(_ outcome: OutcomeRecord, eventTime: Double?) {}
    public func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {}
    public func flowChanged(paused: Bool, partitions: [TopicPartition]) {}
    public func parked(_ record: SourceRecord, devices: Int, reason: String) {}
}

/// Seconds since 1970.
package func wallClockSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Runs records from an `EventSource` through the rules and the transport into a `ResultSink`.
///
/// - Important: `received`, `assigned` and `revoking` are called on the source's thread; records
///   are processed concurrently on record lanes (long-lived tasks on `processingExecutor`, or on Swift's
///   cooperative pool); no call here blocks a thread.
public final class Pipeline: SourceHandler {
    struct State {
        var tracker = OffsetTracker()
        var flow: FlowControl
        var assigned: Set<TopicPartition> = []
        var revoking: Set<TopicPartition> = []
        /// Partitions that stopped fetching because they hold `maxRecordsInFlight` records behind a slow one.
        var fetchStopped: Set<TopicPartition> = []
        var counters = PipelineCounters()
        var receiving = true
        var fatalError: String?
    }

    public let configuration: PipelineConfiguration
    let source: any EventSource
    let sink: any ResultSink
    let planner: any NotificationPlanner
    let transport: any PushTransport
    let observer: (any PipelineObserver)?
    let state: Mutex<State>
    /// The tasks records are processed on (on the executors `init`'s `processingExecutor` gives, else the
    /// global concurrent executor): a lane per record in flight, kept between records.
    let lanes: RecordLanes<TakenRecord>

    /// A record the pipeline took, with the assignment generation it was taken in.
    struct TakenRecord: Sendable {
        var record: SourceRecord
        var generation: UInt64
    }

    /// Lanes kept at most: one per record in flight (the cap bounds how many are busy at once), but no
    /// more than this, since each holds about 1.5 KiB while idle. Records beyond it get tasks of their own.
    static let maximumLanes = 4096

    /// - Parameter processingExecutor: gives the executor each record lane prefers (called once per
    ///   lane): the worker passes its event loops, so that a record's sends and their responses stay on
    ///   one thread. Only non-blocking work runs on a lane. Nil runs records on the global concurrent
    ///   executor.
    public init(
        configuration: PipelineConfiguration, source: any EventSource, sink: any ResultSink,
        planner: any NotificationPlanner, transport: any PushTransport, observer: (any PipelineObserver)? = nil,
        processingExecutor: (@Sendable () -> any TaskExecutor)? = nil
    ) {
        self.configuration = configuration
        self.source = source
        self.sink = sink
        self.planner = planner
        self.transport = transport
        self.observer = observer
        let cap = max(1, configuration.maxRecordsInFlight)
        state = Mutex(State(flow: FlowControl(capacity: cap, lowWaterMark: configuration.resumeBelow ?? cap / 2)))
        lanes = RecordLanes(maximumLanes: min(cap, Self.maximumLanes), executor: processingExecutor)
        // Weak: the lanes belong to the pipeline, and their idle tasks must not keep it alive.
        lanes.start { [weak self] taken in await self?.process(taken.record, generation: taken.generation) }
    }

    deinit {
        // A pipeline dropped without `drain` (tests, a failed start) must not leave idle lane tasks behind.
        lanes.stop()
    }

    /// Starts consuming.
    public func start() throws {
        try source.start(handler: self)
    }

    public var counters: PipelineCounters { state.withLock { $0.counters } }
    /// Records taken and not yet finished (what the in-flight cap counts).
    public var recordsInFlight: Int { state.withLock { $0.flow.inFlight } }
    /// Partitions that stopped fetching because a slow record holds too many records behind it.
    public var fetchStoppedPartitions: Set<TopicPartition> { state.withLock { $0.fetchStopped } }
    public var isPaused: Bool { state.withLock { $0.flow.isPaused } }
    /// Set when results could not be published; the worker must stop without committing past it.
    public var fatalError: String? { state.withLock { $0.fatalError } }

    // MARK: SourceHandler

    public func received(_ record: SourceRecord) {
        let partition = record.topicPartition
        let (generation, pausePartitions, stopFetching) = state.withLock {
            state -> (UInt64?, [TopicPartition]?, Bool) in
            guard state.receiving, !state.revoking.contains(partition) else { return (nil, nil, false) }
            state.assigned.insert(partition)
            guard let generation = state.tracker.take(partition, offset: record.offset) else { return (nil, nil, false) }
            state.counters.recordsTaken += 1
            let action = state.flow.recordTaken()
            // One partition holding the cap's worth of records (a slow one and those finished behind it)
            // stops fetching alone; the others go on.
            let stopFetching = state.tracker.held(partition) >= heldLimit(partition, state.flow)
                && state.fetchStopped.insert(partition).inserted
            return (generation, action == .pause ? Array(state.assigned) : nil, stopFetching)
        }
        if let pausePartitions {
            source.pause(pausePartitions)
            observer?.flowChanged(paused: true, partitions: pausePartitions)
        }
        if stopFetching {
            source.stopFetching([partition])
            observer?.flowChanged(paused: true, partitions: [partition])
        }
        guard let generation else { return }
        observer?.recordReceived(record)
        lanes.submit(TakenRecord(record: record, generation: generation))
    }

    public func assigned(_ partitions: [TopicPartition]) {
        let paused = state.withLock { state -> Bool in
            state.assigned.formUnion(partitions)
            return state.flow.isPaused
        }
        // Newly assigned partitions join a paused pipeline paused, and a running one running (the source
        // starts them fetching: a revoke ends their earlier pauses).
        if paused { source.pause(partitions) } else { source.resume(partitions) }
    }

    public func revoking(_ partitions: [TopicPartition], deadline: ContinuousClock.Instant) async {
        state.withLock { $0.revoking.formUnion(partitions) }
        while ContinuousClock.now < deadline {
            let unfinished = state.withLock { state in partitions.reduce(0) { $0 + state.tracker.unfinished($1) } }
            if unfinished == 0 { break }
            try? await Task.sleep(for: .milliseconds(2))
        }
        let noLongerStopped = state.withLock { state -> [TopicPartition] in
            var noLongerStopped: [TopicPartition] = []
            for partition in partitions {
                // Unfinished records still run, and their finishes count down the cap.
                let (unfinished, _) = state.tracker.forget(partition)
                state.counters.abandonedAtRevoke += unfinished
                state.assigned.remove(partition)
                state.revoking.remove(partition)
                if state.fetchStopped.remove(partition) != nil { noLongerStopped.append(partition) }
            }
            return noLongerStopped
        }
        // Gone with the revoke (a new assignment starts fetching afresh), so no longer paused here.
        if !noLongerStopped.isEmpty { observer?.flowChanged(paused: false, partitions: noLongerStopped) }
    }

    // MARK: Processing

    func process(_ record: SourceRecord, generation: UInt64) async {
        // Decoding, planning and building the results are synchronous helpers: only what lives across
        // the one await is in this async frame, which then fits the lane task's first allocator slab
        // (frames beyond it cost a malloc and a free per record).
        if record.topic == configuration.retryTopic { await waitUntilDue(record) }
        switch prepare(record) {
        case .deadLetter(let output):
            publish([output], of: record, generation: generation, outcomes: [], eventTime: nil)
        case .ready(let prepared):
            let sent = await transport.deliverAll(prepared.pushes[...])
            let (outputs, outcomes) = results(of: prepared, sent: sent, source: record)
            publish(outputs, of: record, generation: generation, outcomes: outcomes, eventTime: prepared.eventTime)
        }
    }

    /// A decoded and planned event, before its pushes are sent.
    struct PreparedEvent {
        var event: PushEvent
        var plans: [PlannedDelivery]
        /// The pushes among the plans, in order.
        var pushes: [PlannedPush]
        var eventTime: Double?
    }

    enum Preparation {
        case ready(PreparedEvent)
        /// The record as a dead letter: undecodable, invalid, or its event cannot be planned.
        case deadLetter(OutboundRecord)
    }

    func prepare(_ record: SourceRecord) -> Preparation {
        do throws(PipelineInputError) {
            let event = try PipelineInputError.decode(record.value)
            let plans = try PipelineInputError.plan(event, with: planner)
            var pushes: [PlannedPush] = []
            pushes.reserveCapacity(plans.count)
            for plan in plans { if case .send(let push, _) = plan { pushes.append(push) } }
            return .ready(PreparedEvent(event: event, plans: plans, pushes: pushes,
                eventTime: event.occurredAt ?? record.timestamp))
        } catch {
            observer?.deadLettered(record, errorClass: error.errorClass, message: error.message)
            return .deadLetter(DeadLetterHeader.record(
                for: record, errorClass: error.errorClass, message: error.message,
                topic: configuration.deadLetterTopic))
        }
    }

    /// The records to publish for a sent event: one outcome per device, then its invalid-token events.
    func results(of prepared: PreparedEvent, sent: [DeliveryResult], source record: SourceRecord)
        -> (outputs: [OutboundRecord], outcomes: [OutcomeRecord])
    {
        let source = RecordSource(topic: record.topic, partition: record.partition, offset: record.offset)
        var results = outcomes(prepared.plans, sent: sent, event: prepared.event, source: source)
        // Only a push sent again in the other environment (more than one attempt) answers from elsewhere.
        for index in results.indices where (results[index].1?.attempts.count ?? 0) > 1 {
            guard case .send(let push, _) = prepared.plans[index], let report = results[index].1 else { continue }
            let asked = EnvironmentsAsked(report, sentTo: push.request.environment)
            if asked.fellBack {
                results[index].0.environment = asked.final.rawValue
                results[index].0.environmentFallback = true
            }
        }
        var outputs: [OutboundRecord] = []
        outputs.reserveCapacity(results.count)
        let key = Array(prepared.event.id.utf8)
        // Pushes refused for their credential get no outcome yet: they are parked, below.
        for (outcome, report) in results where report?.status != .credentialRefused {
            outputs.append(OutboundRecord(topic: configuration.outcomesTopic, key: key, value: outcome.jsonBytes))
        }
        for (plan, (outcome, report)) in zip(prepared.plans, results) {
            guard let invalid = invalidTokenRecord(plan, outcome, report: report, event: prepared.event) else { continue }
            outputs.append(
                OutboundRecord(
                    topic: configuration.invalidTokensTopic, key: Array(invalid.deviceToken.utf8),
                    value: invalid.json.compactBytes))
        }
        guard let parked = parkedRecord(prepared, sent: sent, source: record) else {
            return (outputs, results.map(\.0))
        }
        outputs.append(parked)
        return (outputs, results.filter { $0.1?.status != .credentialRefused }.map(\.0))
    }

    /// The outcome of every plan, from the results of its sent pushes (in order) or its skip or reject.
    func outcomes(_ plans: [PlannedDelivery], sent: [DeliveryResult], event: PushEvent, source: RecordSource)
        -> [(OutcomeRecord, DeliveryResult?)]
    {
        var next = 0
        let now = wallClockSeconds()
        return plans.map { plan in
            switch plan {
            case .send(let push, let device):
                let result = sent[next]
                next += 1
                let last = result.attempts.last
                return (OutcomeRecord(
                    eventID: event.id, deviceToken: push.request.deviceToken.hex, environment: device.environment,
                    topic: push.request.topic, pushType: push.request.pushType.rawValue, ruleID: push.ruleID,
                    status: OutcomeStatus(result.status), httpStatus: result.response?.status ?? last?.httpStatus,
                    reason: result.expiryReason ?? result.response?.reason?.rawValue ?? last?.reason,
                    apnsID: result.finalAPNsID, apnsUniqueID: result.response?.apnsUniqueID,
                    attempts: result.attempts, source: source, completedAt: now), result)
            case .skip(let device, let reason, let ruleID, let topic, let pushType):
                return (OutcomeRecord(
                    eventID: event.id, deviceToken: device.token, environment: device.environment, topic: topic,
                    pushType: pushType, ruleID: ruleID, status: .skipped, httpStatus: nil, reason: reason,
                    apnsID: nil, apnsUniqueID: nil, attempts: [], source: source, completedAt: now), nil)
            case .reject(let device, let reason, _, let ruleID, let topic, let pushType):
                return (OutcomeRecord(
                    eventID: event.id, deviceToken: device.token, environment: device.environment, topic: topic,
                    pushType: pushType, ruleID: ruleID, status: .rejected, httpStatus: nil, reason: reason,
                    apnsID: nil, apnsUniqueID: nil, attempts: [], source: source, completedAt: now), nil)
            }
        }
    }

    /// The invalid-token event for a push whose final answer proves its token invalid
    /// (`InvalidTokenRecord.invalidatingReason`), naming every environment that was asked.
    func invalidTokenRecord(
        _ plan: PlannedDelivery, _ outcome: OutcomeRecord, report: DeliveryResult?, event: PushEvent
    ) -> InvalidTokenRecord? {
        guard case .send(let push, _) = plan, let report,
            let reason = InvalidTokenRecord.invalidatingReason(of: report)
        else { return nil }
        let asked = EnvironmentsAsked(report, sentTo: push.request.environment)
        return InvalidTokenRecord(
            deviceToken: push.request.deviceToken.hex, environment: asked.final.rawValue, topic: push.request.topic,
            app: push.app, reason: reason.rawValue, invalidSince: report.response?.timestamp?.timeIntervalSince1970,
            eventID: event.id, observedAt: outcome.completedAt,
            checkedEnvironments: asked.environments.map(\.rawValue))
    }

    // MARK: Publishing and finishing

    func publish(
        _ outputs: [OutboundRecord], of record: SourceRecord, generation: UInt64, outcomes: [OutcomeRecord],
        eventTime: Double?
    ) {
        let countdown = AcknowledgementCountdown(count: outputs.count)
        let invalidTokens = outputs.reduce(0) { $0 + ($1.topic == configuration.invalidTokensTopic ? 1 : 0) }
        let parked = outputs.last?.topic == configuration.retryTopic
        let finish: @Sendable (Bool) -> Void = { [self] succeeded in
            finishRecord(
                record, generation: generation, published: succeeded, outcomes: outcomes,
                invalidTokens: invalidTokens, parked: parked, eventTime: eventTime)
        }
        if outputs.isEmpty {
            finish(true)
            return
        }
        let acknowledge: @Sendable (Result<Void, any Error>) -> Void = { [self] result in
            if case .failure(let error) = result {
                // Kept for the log: the worker stops on it, and the operator needs the real cause.
                let cause = "results of \(record.topicPartition) offset \(record.offset) could not be published: "
                    + "\(error)"
                state.withLock { $0.fatalError = $0.fatalError ?? cause }
            }
            if let allSucceeded = countdown.acknowledge(succeeded: (try? result.get()) != nil) {
                finish(allSucceeded)
            }
        }
        let deadLetters = DeadLetterReplacement(sink: sink, topic: configuration.deadLetterTopic)
        for output in outputs {
            sink.publish(output) { [observer] result in
                guard case .failure(let refusal as RecordTooLargeError) = result else {
                    acknowledge(result)
                    return
                }
                // Kafka can never take this record: a smaller dead letter stands in for it, so that the
                // partition moves on instead of stopping the worker for good.
                deadLetters.publish(replacing: output, of: record, after: refusal) { replaced in
                    switch replaced {
                    case .success(let letter):
                        if letter.resultTopic != nil {
                            observer?.deadLettered(record, errorClass: letter.errorClass, message: letter.message)
                        }
                        acknowledge(.success(()))
                    case .failure(let error):
                        acknowledge(.failure(error))
                    }
                }
            }
        }
    }

    func finishRecord(
        _ record: SourceRecord, generation: UInt64, published: Bool, outcomes: [OutcomeRecord], invalidTokens: Int,
        parked: Bool = false, eventTime: Double?
    ) {
        let partition = record.topicPartition
        let changes = state.withLock { state -> FlowChanges in
            guard published else {
                // The record's results are not safely written: its offset must never be stored,
                // so it stays unfinished and holds its partition back until the worker restarts.
                state.counters.publishFailures += 1
                state.fatalError = state.fatalError ?? "results of \(partition) offset \(record.offset) could not be published"
                return FlowChanges()
            }
            state.counters.recordsFinished += 1
            state.counters.outcomes += outcomes.count
            state.counters.invalidTokens += invalidTokens
            // By index: `for outcome in` copies each record (a dozen references) just to read its status.
            for index in outcomes.indices { state.counters.byStatus[outcomes[index].status, default: 0] += 1 }
            if parked {
                state.counters.parked += 1
            } else if outcomes.isEmpty {
                state.counters.deadLettered += 1
            }
            // The in-flight cap counts this record until now; the records it releases (itself and those
            // finished behind it) stop counting towards its partition's limit of held records.
            let (committable, released) = state.tracker.finishReleasing(
                partition, offset: record.offset, generation: generation)
            // Stored under the lock: two finishes storing outside it could reach the source in the
            // opposite order and move the stored offset back. Storing is a non-blocking librdkafka call.
            if let committable { source.store(partition, nextOffset: committable) }
            var result = FlowChanges()
            if released > 0, state.fetchStopped.contains(partition),
                state.tracker.held(partition) <= resumeHolding(partition, state.flow)
            {
                state.fetchStopped.remove(partition)
                result.resumeFetching = partition
                result.running = [partition]
            }
            if state.flow.recordsFinished(1) == .resume {
                result.resume = Array(state.assigned)
                // Those still stopped behind a slow record do not run again with the rest.
                result.running = result.resume.filter { !state.fetchStopped.contains($0) }
            }
            return result
        }
        if let partition = changes.resumeFetching { source.resumeFetching([partition]) }
        if !changes.resume.isEmpty { source.resume(changes.resume) }
        if !changes.running.isEmpty { observer?.flowChanged(paused: false, partitions: changes.running) }
        if published, let observer {
            for index in outcomes.indices { observer.outcomePublished(outcomes[index], eventTime: eventTime) }
        }
    }

    /// What a finished record changes in the flow: every partition resumes (the in-flight count fell to
    /// the low-water mark) and/or its own partition fetches again (it holds few enough records).
    struct FlowChanges {
        var resume: [TopicPartition] = []
        var resumeFetching: TopicPartition?
        /// The partitions that run again, for the observer.
        var running: [TopicPartition] = []
    }

    // MARK: Shutdown

    /// Stops taking records, waits up to `timeout` seconds for in-flight ones, flushes the sink within
    /// what is left of it and closes the source (which commits what was stored). Returns the records
    /// left unfinished; `leftBehind` is told, once the wait is over, how many each partition holds.
    @discardableResult
    public func drain(
        timeout: Double, leftBehind: (@Sendable (_ unfinished: [TopicPartition: Int]) -> Void)? = nil
    ) async -> Int {
        state.withLock { $0.receiving = false }
        source.stopReceiving()
        let deadline = MonotonicClock.seconds() + timeout
        while MonotonicClock.seconds() < deadline, recordsInFlight > 0 {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let (left, unfinished) = state.withLock { state -> (Int, [TopicPartition: Int]) in
            var unfinished: [TopicPartition: Int] = [:]
            for partition in state.assigned where state.tracker.unfinished(partition) > 0 {
                unfinished[partition] = state.tracker.unfinished(partition)
            }
            return (state.flow.inFlight, unfinished)
        }
        leftBehind?(unfinished)
        // Within the drain's time only: what is still unfinished at its end stays uncommitted anyway.
        _ = await sink.flush(timeout: max(0, deadline - MonotonicClock.seconds()))
        try? await source.close()
        // Idle lanes end now; a lane still busy with an abandoned record ends when that record does.
        lanes.stop()
        return left
    }
}

/// Why a record became a dead letter: it could not be decoded, or not planned.
struct PipelineInputError: Error {
    var errorClass: String
    var message: String

    static func decode(_ value: [UInt8]?) throws(PipelineInputError) -> PushEvent {
        do {
            return try PushEventDecoder.decode(value)
        } catch {
            throw PipelineInputError(errorClass: error.kind.rawValue, message: error.message)
        }
    }

    static func plan(_ event: PushEvent, with planner: any NotificationPlanner) throws(PipelineInputError)
        -> [PlannedDelivery]
    {
        do {
            return try planner.plan(event, now: wallClockSeconds())
        } catch {
            throw PipelineInputError(errorClass: error.errorClass, message: error.message)
        }
    }
}

/// Counts acknowledgements of one record's outputs; the last one reports whether all succeeded.
final class AcknowledgementCountdown: Sendable {
    private let remaining: Atomic<Int>
    private let failed = Atomic<Bool>(false)

    init(count: Int) { remaining = Atomic(count) }

    /// Returns nil until the last acknowledgement, then whether every one succeeded.
    func acknowledge(succeeded: Bool) -> Bool? {
        if !succeeded { failed.store(true, ordering: .relaxed) }
        let left = remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue
        guard left == 0 else { return nil }
        return !failed.load(ordering: .relaxed)
    }
}
