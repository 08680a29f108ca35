// The in-flight cap that follows what the APNs pools can carry: the sizing rule, the flow control's
// resize, and a pipeline whose transport's capacity changes under it.

import APNs
import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite struct InFlightSizingTests {
    @Test func followsStreamsPerPushWithinItsBounds() {
        var sizing = InFlightSizing(upperBound: 5000)
        #expect(sizing.capacity(streams: nil) == 5000, "a transport without a limit leaves the configured cap")
        #expect(sizing.capacity(streams: 3000) == 4500, "1.5 × 3000 streams at one push per record")
        for _ in 0..<2000 { sizing.recordFinished(pushes: 2) }
        #expect(abs(sizing.pushesPerRecord - 2) < 0.01)
        #expect((2250...2260).contains(sizing.capacity(streams: 3000)), "two pushes per record need half the records")
        #expect(sizing.capacity(streams: 0) == 256, "a pool not yet connected does not starve the start")
        #expect(sizing.capacity(streams: 1_000_000) == 5000, "never above the configured bound")
        #expect(InFlightSizing(upperBound: 10).capacity(streams: 0) == 10, "the floor never exceeds the bound")
    }

    @Test func ticksEveryInterval() {
        var sizing = InFlightSizing(upperBound: 100)
        let due = (1...(InFlightSizing.interval * 3)).filter { _ in sizing.tick() }.count
        #expect(due == 3)
    }

    @Test func resizingPausesAtOnceBelowTheRecordsInFlightAndResumesWhenItGrows() {
        var flow = FlowControl(capacity: 10, lowWaterMark: 5)
        for _ in 0..<6 { #expect(flow.recordTaken() == .none) }
        #expect(flow.resize(capacity: 6, lowWaterMark: 3) == .pause)
        #expect(flow.isPaused)
        #expect(flow.resize(capacity: 6, lowWaterMark: 3) == .none)
        #expect(flow.resize(capacity: 20, lowWaterMark: 10) == .resume, "6 in flight is below the new mark")
        #expect(!flow.isPaused)
        #expect(flow.capacity == 20 && flow.lowWaterMark == 10)
        #expect(flow.resize(capacity: 3, lowWaterMark: 7) == .pause)
        #expect(flow.lowWaterMark == 2, "the mark stays below the cap")
    }

    /// A transport whose pushes wait until the test opens them, reporting the capacity the test sets.
    final class GatedTransport: PushTransport {
        let streams = Atomic<Int>(200)
        let open = Atomic<Bool>(false)
        let concurrent = Atomic<Int>(0)
        let peak = Atomic<Int>(0)

        var streamCapacity: Int? { streams.load(ordering: .relaxed) }

        func deliver(_ push: PlannedPush) async -> DeliveryResult {
            let now = concurrent.add(1, ordering: .relaxed).newValue
            peak.max(now, ordering: .relaxed)
            await eventually(timeout: .seconds(60)) { open.load(ordering: .relaxed) }
            concurrent.subtract(1, ordering: .relaxed)
            return apnsAnswer(push, status: 200)
        }
    }

    @Test func defaultLowWaterMarkIsAnEighthBelowTheCap() {
        #expect(FlowControl.defaultLowWaterMark(capacity: 8000) == 7000)
        #expect(FlowControl.defaultLowWaterMark(capacity: 300) == 263)
        #expect(FlowControl.defaultLowWaterMark(capacity: 4) == 3, "at least one record below the cap")
        #expect(FlowControl.defaultLowWaterMark(capacity: 1) == 0)
    }

    /// A started pipeline over `transport`, with 1200 records of one device each to take.
    static func startedPipeline(over transport: GatedTransport) throws -> Pipeline {
        let token = String(repeating: "ab", count: 32)
        let records = (Int64(0)..<1200).map { makeRecord(partition: Int32($0 % 4), offset: $0, devices: [token]) }
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: InMemoryEventSource(records: records),
            sink: InMemoryResultSink(), planner: OnePushPerDevicePlanner(), transport: transport)
        try pipeline.start()
        return pipeline
    }

    /// A pipeline paused at its cap, its pushes all waiting (a long round trip: nothing is taken or finishes),
    /// still follows the pools as they connect and grow: at start-up the cap is sized before any connection
    /// is open, and stayed at that size for the whole first round trip.
    @Test func aPausedPipelineWhoseRecordsAllWaitStillFollowsTheTransport() async throws {
        let transport = GatedTransport()
        let pipeline = try Self.startedPipeline(over: transport)
        #expect(await eventually(timeout: .seconds(30)) { pipeline.recordsInFlight == 300 && pipeline.isPaused })

        // Nothing finishes, and yet the pipeline takes what the larger pools carry: 1.5 × 600 streams.
        transport.streams.store(600, ordering: .relaxed)
        #expect(await eventually(timeout: .seconds(30)) { pipeline.recordsInFlight == 900 })
        #expect(pipeline.recordsInFlightLimit == 900 && pipeline.counters.recordsFinished == 0)
        // Every one of them waiting at the transport at once.
        #expect(await eventually(timeout: .seconds(30)) { transport.concurrent.load(ordering: .relaxed) == 900 })

        transport.open.store(true, ordering: .relaxed)
        #expect(await eventually(timeout: .seconds(60)) { pipeline.counters.recordsFinished == 1200 })
        #expect(pipeline.counters.outcomes == 1200)
    }

    @Test func pipelineCapFollowsTheTransportsCapacity() async throws {
        let transport = GatedTransport()
        let pipeline = try Self.startedPipeline(over: transport)
        // 200 streams carry 300 records of one push each (1.5 × 200): consumption pauses there.
        #expect(pipeline.recordsInFlightLimit == 300)
        #expect(await eventually(timeout: .seconds(30)) { pipeline.recordsInFlight == 300 && pipeline.isPaused })
        #expect(transport.peak.load(ordering: .relaxed) <= 300)

        // The pools grew: the cap follows as records finish, and every record is done.
        transport.streams.store(2000, ordering: .relaxed)
        transport.open.store(true, ordering: .relaxed)
        #expect(await eventually(timeout: .seconds(60)) { pipeline.counters.recordsFinished == 1200 })
        #expect(pipeline.recordsInFlightLimit == 3000)
        #expect(pipeline.counters.outcomes == 1200)
    }
}
