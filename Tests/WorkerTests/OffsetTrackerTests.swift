// Which offset may be committed: only the finished prefix of each partition, across revokes, and the
// pause and resume of flow control.

import TestSupport
import Testing

@testable import Worker

@Suite struct OffsetTrackerTests {
    let partition = TopicPartition(topic: "push.requests", partition: 3)

    @Test func storesOnlyTheContiguousFinishedPrefix() throws {
        var tracker = OffsetTracker()
        let takenGeneration = tracker.take(partition, offset: 10)
        let generation = try #require(takenGeneration)
        _ = tracker.take(partition, offset: 11)
        _ = tracker.take(partition, offset: 12)
        #expect(tracker.finish(partition, offset: 12, generation: generation) == nil)
        #expect(tracker.finish(partition, offset: 11, generation: generation) == nil)
        #expect(tracker.committableOffset(partition) == nil)
        #expect(tracker.finish(partition, offset: 10, generation: generation) == 13)
        #expect(tracker.unfinishedCount == 0)
    }

    @Test func skipsGapsInOffsets() throws {
        var tracker = OffsetTracker()
        let takenGeneration = tracker.take(partition, offset: 100)
        let generation = try #require(takenGeneration)
        _ = tracker.take(partition, offset: 105)
        #expect(tracker.finish(partition, offset: 100, generation: generation) == 101)
        #expect(tracker.oldestUnfinished(partition) == 105)
        #expect(tracker.finish(partition, offset: 105, generation: generation) == 106)
    }

    @Test func refusesRedeliveredOffsetsAndDoubleFinishes() throws {
        var tracker = OffsetTracker()
        let takenGeneration = tracker.take(partition, offset: 5)
        let generation = try #require(takenGeneration)
        #expect(tracker.take(partition, offset: 5) == nil)
        #expect(tracker.take(partition, offset: 4) == nil)
        #expect(tracker.finish(partition, offset: 5, generation: generation) == 6)
        #expect(tracker.finish(partition, offset: 5, generation: generation) == nil)
        #expect(tracker.take(partition, offset: 5) == nil)
        #expect(tracker.unfinishedCount == 0)
    }

    @Test func workAbandonedAtARevokeCannotFinishALaterAssignment() throws {
        var tracker = OffsetTracker()
        let takenOld = tracker.take(partition, offset: 7)
        let old = try #require(takenOld)
        #expect(tracker.forget(partition) == (1, 0))
        #expect(tracker.unfinishedCount == 0)
        let takenNew = tracker.take(partition, offset: 7)
        let new = try #require(takenNew)
        #expect(new != old)
        #expect(tracker.finish(partition, offset: 7, generation: old) == nil)
        #expect(tracker.unfinished(partition) == 1)
        #expect(tracker.finish(partition, offset: 7, generation: new) == 8)
    }

    @Test func finishedRecordsBehindASlowOneStayHeldUntilItFinishes() throws {
        var tracker = OffsetTracker()
        var generation: UInt64 = 0
        for offset in Int64(0)..<5 {
            let taken = tracker.take(partition, offset: offset)
            generation = try #require(taken)
        }
        for offset in Int64(1)..<5 {
            #expect(tracker.finishReleasing(partition, offset: offset, generation: generation) == (nil, 0))
        }
        #expect(tracker.held(partition) == 5)
        #expect(tracker.finishReleasing(partition, offset: 0, generation: generation) == (5, 5))
        #expect(tracker.held(partition) == 0)
        // A record of a forgotten partition releases only itself.
        _ = tracker.take(partition, offset: 9)
        _ = tracker.take(partition, offset: 10)
        _ = tracker.finish(partition, offset: 10, generation: generation)
        #expect(tracker.forget(partition) == (1, 1))
        #expect(tracker.finishReleasing(partition, offset: 9, generation: generation) == (nil, 1))
    }

    @Test func partitionsAreIndependent() throws {
        var tracker = OffsetTracker()
        let other = TopicPartition(topic: "push.requests", partition: 4)
        let takenA = tracker.take(partition, offset: 1)
        let a = try #require(takenA)
        let takenB = tracker.take(other, offset: 1)
        let b = try #require(takenB)
        _ = tracker.take(partition, offset: 2)
        #expect(tracker.finish(other, offset: 1, generation: b) == 2)
        #expect(tracker.committableOffset(partition) == nil)
        #expect(tracker.finish(partition, offset: 1, generation: a) == 2)
        #expect(tracker.unfinishedCount == 1)
    }

    @Test func randomCompletionOrderNeverPassesAnUnfinishedRecord() throws {
        var generator = SeededGenerator.replayable("randomCompletionOrderNeverPassesAnUnfinishedRecord")
        var tracker = OffsetTracker()
        var generation: UInt64 = 0
        for offset in 0..<5000 {
            let taken = tracker.take(partition, offset: Int64(offset * 2))
            generation = try #require(taken)
        }
        var pending = Set((0..<5000).map { Int64($0 * 2) })
        for offset in pending.shuffled(using: &generator) {
            pending.remove(offset)
            if let stored = tracker.finish(partition, offset: offset, generation: generation) {
                // Everything below the stored offset is finished; the first pending one is not below it.
                #expect(pending.allSatisfy { $0 >= stored })
            }
        }
        #expect(tracker.committableOffset(partition) == 9999)
    }
}

@Suite struct FlowControlTests {
    @Test func pausesAtCapacityAndResumesAtTheLowWaterMark() {
        var flow = FlowControl(capacity: 4, lowWaterMark: 1)
        #expect(flow.recordTaken() == .none)
        #expect(flow.recordTaken() == .none)
        #expect(flow.recordTaken() == .none)
        #expect(flow.recordTaken() == .pause)
        #expect(flow.recordTaken() == .none)  // already paused: records fetched before the pause
        #expect(flow.recordsFinished(3) == .none)
        #expect(flow.inFlight == 2)
        #expect(flow.recordsFinished() == .resume)
        #expect(!flow.isPaused)
        #expect(flow.recordsFinished() == .none)
    }
}
