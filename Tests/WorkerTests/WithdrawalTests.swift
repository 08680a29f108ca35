// Pushes still waiting when their partition is revoked, or when the pipeline drains, are withdrawn: the
// revoke and the drain stop waiting for them, their records publish nothing and stay uncommitted, and
// their partition's next owner does them in full. Records taken and not yet started go on as those running
// do, unless they start only once the revoke or the drain has let go of them.

import APNs
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Worker

/// Answers 200 at once for every device but `heldToken`, whose push waits (as for a pool that is down)
/// until the pipeline withdraws it.
private struct HoldingTransport: PushTransport {
    let heldToken: String

    func deliver(_ push: PlannedPush) async -> DeliveryResult { apnsAnswer(push, status: 200) }

    func deliverAll(_ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?) async -> [DeliveryResult] {
        guard let withdrawal else { return await deliverConcurrently(pushes) }
        var results: [DeliveryResult] = []
        for push in pushes {
            guard push.request.deviceToken?.hex == heldToken else {
                results.append(apnsAnswer(push, status: 200))
                continue
            }
            // Long enough that a revoke or drain that waited for it would run out its own deadline first.
            _ = await eventually(timeout: .seconds(600)) { withdrawal.isWithdrawn }
            results.append(
                DeliveryResult(
                    status: withdrawal.isWithdrawn ? .withdrawn : .failed, response: nil, attempts: [],
                    summary: "held"))
        }
        return results
    }
}

/// Holds every record a pipeline hands it until `open()`, then runs them (and later ones): as tasks on a queue
/// of its own when it is the lanes' executor, or as the worker runs them, event-loop work, when it is the
/// pipeline's `recordRunner`. Until then the records are taken and not yet started.
private final class RecordGate: TaskExecutor, Sendable {
    private let held = Mutex<(isOpen: Bool, jobs: [UnownedJob], work: [@Sendable () -> Void])>((false, [], []))
    private let queue = DispatchQueue(label: "record-gate")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let runsNow = held.withLock { held in
            if !held.isOpen { held.jobs.append(job) }
            return held.isOpen
        }
        if runsNow { run(job) }
    }

    /// A `recordRunner` that holds the records' work until `open()`.
    func runner(_ work: @escaping @Sendable () -> Void) {
        let runsNow = held.withLock { held in
            if !held.isOpen { held.work.append(work) }
            return held.isOpen
        }
        if runsNow { RecordRunning.loops.execute(work) }
    }

    func open() {
        let (jobs, work) = held.withLock { held in
            held.isOpen = true
            defer { (held.jobs, held.work) = ([], []) }
            return (held.jobs, held.work)
        }
        for job in jobs { run(job) }
        for item in work { RecordRunning.loops.execute(item) }
    }

    private func run(_ job: UnownedJob) {
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Every hand-over the pipeline reports, in order.
final class HandOverRecorder: PipelineObserver {
    private let handOvers = Mutex<[RecordsHandedOver]>([])
    var all: [RecordsHandedOver] { handOvers.withLock { $0 } }
    func recordsHandedOver(_ handOver: RecordsHandedOver) { handOvers.withLock { $0.append(handOver) } }
}

@Suite struct WithdrawalTests {
    /// The value of `apns_worker_<family>{cause="<cause>"}` in the worker's exposition; nil when absent.
    static func handedOver(_ metrics: WorkerMetrics, _ family: String, cause: String) -> Double? {
        let series = "apns_worker_\(family){cause=\"\(cause)\"} "
        let text = String(decoding: metrics.registry.exposition(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap { Double($0.dropFirst(series.count)) }
    }

    static let held = String(format: "%064x", 1)
    static let answered = String(format: "%064x", 2)
    let first = TopicPartition(topic: "push.requests", partition: 0)
    let second = TopicPartition(topic: "push.requests", partition: 1)

    @Test func aRevokeWithdrawsWaitingPushesInsteadOfWaitingAndTheDrainWithdrawsTheRest() async throws {
        let source = InMemoryEventSource(records: [
            makeRecord(partition: 0, offset: 0, devices: [Self.held]),
            // One push answered, one withdrawn: the record publishes neither outcome.
            makeRecord(partition: 0, offset: 1, devices: [Self.answered, Self.held]),
            makeRecord(partition: 1, offset: 0, devices: [Self.held]),
            makeRecord(partition: 1, offset: 1, devices: [Self.answered]),
        ])
        let sink = InMemoryResultSink()
        // What an operator sees: the worker's own observers, metrics first, then the revoke's log line.
        let metrics = try WorkerMetrics()
        let captured = CapturedLog()
        let writer = LogWriter(output: captured.output, startsWriterThread: false)
        let handOvers = HandOverRecorder()
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: HoldingTransport(heldToken: Self.held),
            observer: MetricsObserver(
                metrics: metrics,
                next: HandOverLog(
                    revokeLogger: Logger(writer: writer), shutdownLogger: Logger(writer: writer), drainTimeout: 30,
                    next: handOvers)))
        try pipeline.start()
        #expect(await eventually { pipeline.counters.recordsTaken == 4 && pipeline.counters.recordsFinished == 1 })
        #expect(Self.handedOver(metrics, "records_released_unsent_total", cause: "revoke") == 0)

        // A deadline far beyond what the withdrawal takes: had the revoke waited for the held pushes, nothing below would hold.
        await pipeline.revoking([first], deadline: .now + .seconds(30))
        #expect(pipeline.counters.withdrawn == 2)
        #expect(pipeline.counters.abandonedAtRevoke == 0, "nothing was left running: both records came back withdrawn")
        #expect(pipeline.recordsInFlight == 1, "the second partition's held record still counts")
        #expect(
            handOvers.all == [RecordsHandedOver(cause: .revoke, releasedUnsent: [first: 2], leftRunning: [:])])
        #expect(Self.handedOver(metrics, "records_released_unsent_total", cause: "revoke") == 2)
        #expect(Self.handedOver(metrics, "records_left_running_total", cause: "revoke") == 0)
        writer.flush()
        let line = try #require(
            try captured.lines().first { $0["message"]?.stringValue?.hasPrefix("revoked partitions") == true })
        #expect(line["fields"]?["records_released_unsent"] == 2)
        #expect(line["fields"]?["records_left_running"] == 0)
        #expect(line["fields"]?["partitions"] == ["push.requests[0]"])

        let waitOver = Mutex(0)
        let left = await pipeline.drain(timeout: 30) { waitOver.withLock { $0 += 1 } }
        #expect(left == 1)
        #expect(waitOver.withLock { $0 } == 1)
        #expect(pipeline.counters.withdrawn == 3)
        #expect(
            handOvers.all.last == RecordsHandedOver(cause: .shutdown, releasedUnsent: [second: 1], leftRunning: [:]))
        #expect(Self.handedOver(metrics, "records_released_unsent_total", cause: "shutdown") == 1)
        #expect(Self.handedOver(metrics, "records_released_unsent_total", cause: "revoke") == 2)
        // The shutdown's own line (component shutdown in the worker), once, with the records it released.
        writer.flush()
        let released = try captured.lines().filter {
            $0["message"]?.stringValue?.hasPrefix("records whose pushes were waiting") == true
        }
        #expect(released.count == 1)
        #expect(released.first?["fields"]?["records_released"] == 1)
        #expect(released.first?["fields"]?["partitions"] == ["push.requests[1]"])
        #expect(
            try captured.lines().contains { $0["message"]?.stringValue?.hasPrefix("the drain timeout") == true }
                == false)

        // Only the record that never waited published; no offset was stored, since each partition's first
        // record is unfinished.
        let outcomes = sink.json(on: "push.outcomes")
        #expect(outcomes.count == 1)
        #expect(outcomes.first?["event_id"] == "e1-1")
        #expect(source.log.withLock { $0.stored } == [:])
    }

    @Test func pushesThatDoNotWaitFinishAsBeforeAndTheirRecordsAreCommitted() async throws {
        let source = InMemoryEventSource(records: [
            makeRecord(partition: 0, offset: 0, devices: [Self.answered]),
            makeRecord(partition: 0, offset: 1, devices: [Self.answered, Self.answered]),
        ])
        let sink = InMemoryResultSink()
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: HoldingTransport(heldToken: Self.held))
        try pipeline.start()
        #expect(await eventually { pipeline.counters.recordsFinished == 2 })
        await pipeline.revoking([first], deadline: .now + .seconds(30))
        #expect(pipeline.counters.withdrawn == 0)
        #expect(pipeline.counters.abandonedAtRevoke == 0)
        #expect(sink.json(on: "push.outcomes").count == 3)
        #expect(source.log.withLock { $0.stored[first] } == 2)
    }

    @Test func aParkedRecordWaitingUntilDueIsReleasedAtItsRevokeWithoutBeingSent() async throws {
        // Due in 60 s (the pipeline waits at most a park delay, 600 s here): its revoke comes first.
        let notBefore = Int64((Date().timeIntervalSince1970 + 60) * 1000)
        let device = #"{"token":"\#(Self.answered)","environment":"production"}"#
        let event = #"{"id":"parked","type":"test","app":"com.example.app","devices":[\#(device)]}"#
        let parked = SourceRecord(
            topic: "push.retry", partition: 0, offset: 0, key: Array("k".utf8), value: Array(event.utf8),
            headers: [RecordHeader(name: "apns-worker.park.not-before", value: Array(String(notBefore).utf8))])
        let source = InMemoryEventSource(records: [parked])
        let sink = InMemoryResultSink()
        var configuration = PipelineConfiguration()
        configuration.parkDelay = 600
        let pipeline = Pipeline(
            configuration: configuration, source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: HoldingTransport(heldToken: Self.held))
        try pipeline.start()
        #expect(await eventually { pipeline.counters.recordsTaken == 1 })
        let partition = TopicPartition(topic: "push.retry", partition: 0)
        await pipeline.revoking([partition], deadline: .now + .seconds(30))
        #expect(pipeline.counters.withdrawn == 1)
        #expect(pipeline.recordsInFlight == 0)
        #expect(sink.json(on: "push.outcomes").isEmpty, "the parked record's push was sent after its revoke")
        #expect(source.log.withLock { $0.stored } == [:])
    }

    /// Three records taken, none started (their lanes' executor holds them), and a drain begins.
    fileprivate func pipelineWithRecordsNotStarted(observer: HandOverRecorder, running: RecordRunning)
        async -> (Pipeline, RecordGate, InMemoryEventSource, InMemoryResultSink)
    {
        let source = InMemoryEventSource(
            records: (0..<3).map { makeRecord(partition: 0, offset: $0, devices: [Self.answered]) })
        let sink = InMemoryResultSink()
        let gate = RecordGate()
        let onLanes: @Sendable () -> any TaskExecutor = { gate }
        let asLoopWork: @Sendable (@escaping @Sendable () -> Void) -> Void = { gate.runner($0) }
        let executor = running == .lanes ? onLanes : nil
        let runner = running == .lanes ? nil : asLoopWork
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: HoldingTransport(heldToken: Self.held), observer: observer, processingExecutor: executor,
            recordRunner: runner)
        #expect(throws: Never.self) { try pipeline.start() }
        #expect(await eventually { pipeline.counters.recordsTaken == 3 })
        #expect(pipeline.counters.recordsFinished == 0)
        return (pipeline, gate, source, sink)
    }

    @Test(arguments: RecordRunning.allCases)
    func recordsTakenBeforeTheDrainThatStartWhileItWaitsFinishAndAreCommitted(running: RecordRunning) async throws {
        // A record is taken on the consumer's thread and starts when its lane's loop gets to it: on a busy
        // loop, the drain can come between. Handing such a record over would make the next owner redo the
        // records behind it that finished on the other loop, pushes sent twice.
        let handOvers = HandOverRecorder()
        let (pipeline, gate, source, sink) = await pipelineWithRecordsNotStarted(observer: handOvers, running: running)
        let drained = Task { await pipeline.drain(timeout: 30) }
        #expect(await eventually { pipeline.state.withLock { !$0.receiving } })
        gate.open()
        #expect(await drained.value == 0)
        #expect(pipeline.counters.withdrawn == 0)
        #expect(handOvers.all.isEmpty)
        #expect(sink.json(on: "push.outcomes").count == 3)
        #expect(source.log.withLock { $0.stored[first] } == 3)
    }

    @Test(arguments: RecordRunning.allCases)
    func recordsThatHaveNotStartedWhenTheDrainsWaitEndsNeverStart(running: RecordRunning) async throws {
        let handOvers = HandOverRecorder()
        let (pipeline, gate, source, sink) = await pipelineWithRecordsNotStarted(observer: handOvers, running: running)
        #expect(await pipeline.drain(timeout: 0.2) == 3, "taken and unfinished when the drain's time ran out")
        gate.open()
        #expect(await eventually { pipeline.counters.withdrawn == 3 })
        #expect(sink.json(on: "push.outcomes").isEmpty, "a record started after the drain let go of it")
        #expect(source.log.withLock { $0.stored } == [:])
        #expect(handOvers.all == [RecordsHandedOver(cause: .shutdown, releasedUnsent: [:], leftRunning: [first: 3])])
    }

    @Test(arguments: RecordRunning.allCases)
    func aRevokeFinishesItsPartitionsRecordsThatStartWhileItWaits(running: RecordRunning) async throws {
        let handOvers = HandOverRecorder()
        let (pipeline, gate, source, sink) = await pipelineWithRecordsNotStarted(observer: handOvers, running: running)
        let revoked = Task { await pipeline.revoking([first], deadline: .now + .seconds(30)) }
        #expect(await eventually { pipeline.state.withLock { $0.revoking.contains(first) } })
        gate.open()
        await revoked.value
        #expect(pipeline.counters.abandonedAtRevoke == 0)
        #expect(pipeline.counters.withdrawn == 0)
        #expect(sink.json(on: "push.outcomes").count == 3)
        #expect(source.log.withLock { $0.stored[first] } == 3)
        #expect(handOvers.all.isEmpty)
    }
}
