// The pipeline's record lanes: long-lived tasks that take records one at a time. Every item is handled
// exactly once; an idle lane is reused rather than a task made per item; at most `maximumLanes` lanes
// exist and items beyond them still run at once; stop ends the lanes.

import APNs
import Foundation
import HTTP2
import Synchronization
import TestSupport
import Testing

@testable import Worker

/// Items handled, and gates that hold handlers until a test lets them go.
final class LaneProbe: Sendable {
    let handled = Mutex<[Int]>([])
    let held = Mutex<[Int: CheckedContinuation<Void, Never>]>([:])
    let holds: Bool

    init(holds: Bool) { self.holds = holds }

    func handle(_ item: Int) async {
        if holds { await withCheckedContinuation { continuation in held.withLock { $0[item] = continuation } } }
        handled.withLock { $0.append(item) }
    }

    func releaseAll() {
        for continuation in held.withLock({ held in
            defer { held = [:] }
            return Array(held.values)
        }) {
            continuation.resume()
        }
    }

    var heldCount: Int { held.withLock { $0.count } }
    var handledItems: [Int] { handled.withLock { $0 } }
}

@Suite struct RecordLanesTests {
    @Test func oneItemAtATimeReusesOneLane() async {
        let probe = LaneProbe(holds: false)
        let lanes = RecordLanes<Int>(maximumLanes: 8, executor: nil)
        lanes.start { await probe.handle($0) }
        for item in 0..<200 {
            lanes.submit(item)
            #expect(await eventually { probe.handledItems.count == item + 1 })
            // Back in the idle list before the next submit.
            #expect(await eventually { lanes.idleCount == 1 })
        }
        #expect(probe.handledItems == Array(0..<200))
        // A task per item would have started 200.
        #expect(lanes.counts.lanesStarted == 1)
        #expect(lanes.counts.oneOffTasks == 0)
        lanes.stop()
        #expect(await eventually { lanes.counts.lanesRunning == 0 })
    }

    @Test func busyLanesAreNeverWaitedForAndTheLaneCountIsBounded() async {
        let probe = LaneProbe(holds: true)
        let lanes = RecordLanes<Int>(maximumLanes: 4, executor: nil)
        lanes.start { await probe.handle($0) }
        for item in 0..<10 { lanes.submit(item) }
        // All ten run at once: four on lanes, six on tasks of their own; none waits for a lane.
        #expect(await eventually { probe.heldCount == 10 })
        #expect(lanes.counts.lanesStarted == 4)
        #expect(lanes.counts.oneOffTasks == 6)
        probe.releaseAll()
        #expect(await eventually { probe.handledItems.count == 10 })
        #expect(Set(probe.handledItems) == Set(0..<10))
        // The four lanes wait for more; the next items go to them.
        #expect(await eventually { lanes.idleCount == 4 })
        for item in 10..<14 { lanes.submit(item) }
        #expect(await eventually { probe.heldCount == 4 })
        #expect(lanes.counts.lanesStarted == 4)
        #expect(lanes.counts.oneOffTasks == 6)
        probe.releaseAll()
        #expect(await eventually { probe.handledItems.count == 14 })
        lanes.stop()
        #expect(await eventually { lanes.counts.lanesRunning == 0 })
    }

    @Test func stopEndsIdleLanesAtOnceAndBusyOnesAfterTheirItem() async {
        let probe = LaneProbe(holds: true)
        let lanes = RecordLanes<Int>(maximumLanes: 4, executor: nil)
        lanes.start { await probe.handle($0) }
        for item in 0..<4 { lanes.submit(item) }
        #expect(await eventually { probe.heldCount == 4 })
        probe.releaseAll()
        #expect(await eventually { lanes.idleCount == 4 })
        lanes.submit(4)
        #expect(await eventually { probe.heldCount == 1 })
        lanes.stop()
        // Three idle lanes end; the busy one finishes its item first.
        #expect(await eventually { lanes.counts.lanesRunning == 1 })
        probe.releaseAll()
        #expect(await eventually { lanes.counts.lanesRunning == 0 })
        #expect(probe.handledItems.count == 5)
        // After stop an item still runs, on a task of its own.
        lanes.submit(5)
        #expect(await eventually { probe.heldCount == 1 })
        probe.releaseAll()
        #expect(await eventually { probe.handledItems.count == 6 })
        #expect(lanes.counts.lanesStarted == 4)
    }

    @Test func lanesRunOnTheExecutorTheyAreGiven() async {
        let loops = EventLoopGroup(threadCount: 2)
        let threads = Mutex<Set<String>>([])
        let lanes = RecordLanes<Int>(maximumLanes: 8, executor: { loops.taskExecutor() })
        lanes.start { _ in
            threads.withLock { _ = $0.insert(Thread.current.name ?? "unnamed") }
            // Resumes on the lane's executor too, after a sleep as after a yield. (The sleep once seemed
            // to move items to the cooperative pool: it was loop threads that had missed their OS name.)
            await Task.yield()
            try? await Task.sleep(for: .milliseconds(1))
            threads.withLock { _ = $0.insert(Thread.current.name ?? "unnamed") }
        }
        for item in 0..<8 { lanes.submit(item) }
        #expect(await eventually { lanes.idleCount == 8 })
        let names = threads.withLock { $0 }
        #expect(!names.isEmpty)
        #expect(names.allSatisfy { $0.hasPrefix("h2-loop") }, "\(names)")
        lanes.stop()
        #expect(await eventually { lanes.counts.lanesRunning == 0 })
        await loops.shutdown()
    }
}
