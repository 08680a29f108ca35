// The pipeline: decode → plan (rules) → send (with retries) → publish results → store the offset
// once the record and every earlier record of its partition are finished. At-least-once: a
// record is finished only when every result it produced is acknowledged by the sink.

import APNs
import Synchronization

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
    /// The most records in flight (taken, not finished): consumption pauses there. Below it the cap follows
    /// what the transport can carry (`PushTransport.streamCapacity`, see `InFlightSizing`). The cap is also
    /// the most records one partition may hold before it stops fetching (taken and not committable:
    /// finished ones waiting behind a slow one count, since a crash would redo them). Default: `5000`.
    public var maxRecordsInFlight = 5000
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
    /// Records still running when their partition's revoke ended (its wait is bounded by `revokeTimeout`):
    /// uncommitted, so the next owner sends them again.
    public var abandonedAtRevoke = 0
    /// Records released unsent because their pushes were withdrawn while they waited (a revoke, a drain).
    public var withdrawn = 0
    public var publishFailures = 0
}

/// Observes results as they are published (the `dev` command prints them; metrics count them).
public protocol PipelineObserver: Sendable {
    func recordReceived(_ record: SourceRecord)
    /// A record's outcomes, once Kafka has acknowledged all of its results: one call per record, with their
    /// counts by status (and the records themselves when `keepsOutcomeRecords`).
    func outcomesPublished(_ outcomes: PublishedOutcomes, eventTime: Double?)
    /// Whether `outcomesPublished` needs the outcome records (`PublishedOutcomes.records`), as a printer of
    /// each outcome does. Keeping them costs every record's outcomes in memory until Kafka acknowledges
    /// them; counting needs none. Read once, when the pipeline is made. Default: false.
    var keepsOutcomeRecords: Bool { get }
    func deadLettered(_ record: SourceRecord, errorClass: String, message: String)
    func flowChanged(paused: Bool, partitions: [TopicPartition])
    /// A record's pushes that APNs refused for their credential went to the retry topic.
    func parked(_ record: SourceRecord, devices: Int, reason: String)
    /// Partitions went (a revoke, or the drain at shutdown) with records of theirs unfinished, which their
    /// next owner does again: once per revoke or drain that left any.
    func recordsHandedOver(_ handOver: RecordsHandedOver)
}

/// Records a revoke or a shutdown left unfinished: their offsets are never stored, so the partitions' next
/// owner does them again.
public struct RecordsHandedOver: Sendable, Equatable {
    public enum Cause: String, Sendable, CaseIterable {
        /// The group took the partitions away (a rebalance, or their loss).
        case revoke
        /// The worker is stopping.
        case shutdown
    }

    public var cause: Cause
    /// Records whose pushes were waiting (for APNs, a retry or a paced device) when the partition went, by
    /// partition: withdrawn unsent, nothing of theirs published. The next owner sends them once.
    public var releasedUnsent: [TopicPartition: Int]
    /// Records still running when the revoke's or the drain's time ran out (pushes on their way to APNs, or
    /// results Kafka has not acknowledged yet), by partition: their results may still be published, and the
    /// next owner sends them again, so their devices may get a notification twice.
    public var leftRunning: [TopicPartition: Int]

    public init(cause: Cause, releasedUnsent: [TopicPartition: Int], leftRunning: [TopicPartition: Int]) {
        self.cause = cause
        self.releasedUnsent = releasedUnsent
        self.leftRunning = leftRunning
    }

    public var releasedUnsentCount: Int { releasedUnsent.values.reduce(0, +) }
    public var leftRunningCount: Int { leftRunning.values.reduce(0, +) }
    public var isEmpty: Bool { releasedUnsent.isEmpty && leftRunning.isEmpty }
}

extension PipelineObserver {
    public func recordReceived(_ record: SourceRecord) {}
    public func outcomesPublished(_ outcomes: PublishedOutcomes, eventTime: Double?) {}
    public var keepsOutcomeRecords: Bool { false }
    public func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {}
    public func flowChanged(paused: Bool, partitions: [TopicPartition]) {}
    public func parked(_ record: SourceRecord, devices: Int, reason: String) {}
    public func recordsHandedOver(_ handOver: RecordsHandedOver) {}
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
        var sizing: InFlightSizing
        var assigned: Set<TopicPartition> = []
        var revoking: Set<TopicPartition> = []
        /// Partitions that stopped fetching because they hold `maxRecordsInFlight` records behind a slow one.
        var fetchStopped: Set<TopicPartition> = []
        var counters = PipelineCounters()
        /// Pauses and resumes decided and not yet applied, oldest first (Pipeline+FlowSteps.swift).
        var flowSteps: [FlowStep] = []
        var receiving = true
        var fatalError: String?
        /// Each assigned partition's withdrawal, given to its records' sends: withdrawn (and dropped) when
        /// the partition is revoked, and all of them when the pipeline drains.
        var withdrawals: [TopicPartition: SendWithdrawal] = [:]
        /// Records of the partition's current generation that came back withdrawn: unfinished in the
        /// tracker (their offsets are never stored), but nothing a revoke or a drain waits for any more.
        var withdrawnUnfinished: [TopicPartition: Int] = [:]

        /// The partition's records still running: unfinished, and not withdrawn. A revoke or a drain waits
        /// for these.
        func running(_ partition: TopicPartition) -> Int {
            tracker.unfinished(partition) - withdrawnUnfinished[partition, default: 0]
        }
    }

    public let configuration: PipelineConfiguration
    let source: any EventSource
    let sink: any ResultSink
    /// Set in exactly-once mode: results and offsets go here instead of to `sink` and the source.
    let transactions: (any TransactionalResultSink)?
    let planner: any NotificationPlanner
    let transport: any PushTransport
    let observer: (any PipelineObserver)?
    /// `observer?.keepsOutcomeRecords`, read once.
    let keepsOutcomeRecords: Bool
    let state: Mutex<State>
    /// Held while queued flow steps are applied, so that they reach the source in order.
    let flowStepsApplying = Mutex(())
    /// The tasks records are processed on when they are not loop work (`recordRunner` unset, or a
    /// retry-topic record), on the executors `init`'s `processingExecutor` gives, else the global
    /// concurrent executor: a lane per record in flight, kept between records.
    let lanes: RecordLanes<TakenRecord>
    /// Set when records run as event-loop work rather than on lanes: hands a record's start to a loop.
    let recordRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
    /// Resizes the in-flight cap while the pipeline is paused at it (`startResizingWhilePaused`).
    let pausedResizer = Mutex<Task<Void, Never>?>(nil)

    /// A record the pipeline took, with the assignment generation it was taken in and its partition's
    /// withdrawal.
    struct TakenRecord: Sendable {
        var record: SourceRecord
        var generation: UInt64
        var withdrawal: SendWithdrawal
    }

    /// Lanes kept at most: one per record in flight (the cap bounds how many are busy at once), but no
    /// more than this, since each holds its task's memory while idle. Records beyond it get tasks of their own.
    static let maximumLanes = 4096

    /// - Parameter processingExecutor: gives the executor each record lane prefers (called once per
    ///   lane): the worker passes its event loops, so that a record's sends and their responses stay on
    ///   one thread. Only non-blocking work runs on a lane. Nil runs lanes on the global concurrent
    ///   executor.
    /// - Parameter recordRunner: runs a record's start on an event loop (the worker passes its loops'
    ///   `execute`): the record is decoded and planned there, its first attempts start there, and its
    ///   results are published where the last response arrives, with no task unless a push must retry
    ///   (`Pipeline.begin`). Retry-topic records, which wait for their time, still run on lanes. Nil runs
    ///   every record on a lane.
    /// - Parameter transactions: exactly-once mode: each record's results are held until the record and
    ///   every earlier one of its partition are finished, then written in a transaction with the offset
    ///   (`sink` and the source's offset storage are then unused). A record counts against the in-flight
    ///   cap until its transaction commits, so the cap bounds the results held.
    public init(
        configuration: PipelineConfiguration, source: any EventSource, sink: any ResultSink,
        planner: any NotificationPlanner, transport: any PushTransport, observer: (any PipelineObserver)? = nil,
        processingExecutor: (@Sendable () -> any TaskExecutor)? = nil,
        recordRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
        transactions: (any TransactionalResultSink)? = nil
    ) {
        self.recordRunner = recordRunner
        self.transactions = transactions
        self.configuration = configuration
        self.source = source
        self.sink = sink
        self.planner = planner
        self.transport = transport
        self.observer = observer
        keepsOutcomeRecords = observer?.keepsOutcomeRecords ?? false
        let cap = max(1, configuration.maxRecordsInFlight)
        let sizing = InFlightSizing(upperBound: cap)
        let initial = sizing.capacity(streams: transport.streamCapacity)
        state = Mutex(
            State(
                flow: FlowControl(
                    capacity: initial,
                    lowWaterMark: configuration.resumeBelow ?? FlowControl.defaultLowWaterMark(capacity: initial)),
                sizing: sizing))
        lanes = RecordLanes(maximumLanes: min(cap, Self.maximumLanes), executor: processingExecutor)
        // Weak: the lanes belong to the pipeline, and their idle tasks must not keep it alive.
        lanes.start { [weak self] taken in
            await self?.process(taken.record, generation: taken.generation, withdrawal: taken.withdrawal)
        }
    }

    deinit {
        // A pipeline dropped without `drain` (tests, a failed start) must not leave idle lane tasks behind.
        lanes.stop()
        stopResizingWhilePaused()
    }

    /// Starts consuming.
    public func start() throws {
        try source.start(handler: self)
        startResizingWhilePaused()
    }

    public var counters: PipelineCounters { state.withLock { $0.counters } }
    /// Records taken and not yet finished (what the in-flight cap counts).
    public var recordsInFlight: Int { state.withLock { $0.flow.inFlight } }
    /// Partitions that stopped fetching because a slow record holds too many records behind it.
    public var fetchStoppedPartitions: Set<TopicPartition> { state.withLock { $0.fetchStopped } }
    public var isPaused: Bool { state.withLock { $0.flow.isPaused } }
    /// The in-flight cap now: what the transport can carry, within `maxRecordsInFlight`.
    public var recordsInFlightLimit: Int { state.withLock { $0.flow.capacity } }
    /// Set when results could not be published; the worker must stop without committing past it.
    public var fatalError: String? { state.withLock { $0.fatalError } ?? transactions?.failure }
}
