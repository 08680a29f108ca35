// The pipeline's pause in front of the consumer: records of a closed partition wait, opening hands
// them over, a revocation drops the one held, and shutting down lets the reader leave.

import Synchronization
import TestSupport
import Testing

@testable import Worker

/// A reader parked at the gate, and whether it got past.
///
/// The reader runs on an executor of its own, so the test knows when it is suspended in `admit` rather
/// than not yet there, and that nothing woke it (a wake-up enqueues it on that executor again).
final class GateReader: Sendable {
    final class Passed: Sendable {
        let value = Mutex(false)
    }

    let passed = Passed()
    let executor = ObservedTaskExecutor()
    let task: Task<Bool, Never>
    /// The executor's job count once the reader was parked.
    let jobsWhenParked: Int

    init(_ gate: DeliveryGate, _ partition: TopicPartition) async {
        let passed = self.passed
        task = Task(executorPreference: executor) {
            let admitted = await gate.admit(partition)
            passed.value.withLock { $0 = true }
            return admitted
        }
        let executor = self.executor
        #expect(await eventually { executor.isIdle && !passed.value.withLock { $0 } }, "the reader never parked")
        jobsWhenParked = executor.jobsEnqueued
    }

    deinit { executor.stop() }

    var isWaiting: Bool { !passed.value.withLock { $0 } }
    /// Parked, and not woken since.
    var isStillParked: Bool { isWaiting && executor.isIdle && executor.jobsEnqueued == jobsWhenParked }
}

@Suite struct DeliveryGateTests {
    let first = TopicPartition(topic: "push.requests", partition: 0)
    let second = TopicPartition(topic: "push.requests", partition: 1)

    @Test func anOpenPartitionPassesAtOnce() async {
        let gate = DeliveryGate()
        gate.close([second])
        #expect(await gate.admit(first))
    }

    @Test func aClosedPartitionWaitsUntilOpened() async {
        let gate = DeliveryGate()
        gate.close([first, second])
        let waiting = await GateReader(gate, first)
        #expect(waiting.isWaiting)
        gate.open([second])  // another partition opening does not release it
        #expect(waiting.isStillParked)
        gate.open([first])
        #expect(await waiting.task.value)
    }

    @Test func aRecordHeldWhileItsPartitionIsRevokedIsDropped() async {
        let gate = DeliveryGate()
        gate.close([first])
        let waiting = await GateReader(gate, first)
        #expect(waiting.isWaiting)
        gate.revoked([first])
        #expect(await waiting.task.value == false)
        // Assigned again, the partition starts open and its records pass.
        #expect(await gate.admit(first))
    }

    @Test func aRevocationOfAnotherPartitionKeepsTheRecord() async {
        let gate = DeliveryGate()
        gate.close([first])
        let waiting = await GateReader(gate, first)
        #expect(waiting.isWaiting)
        gate.revoked([second])
        #expect(waiting.isStillParked)
        gate.open([first])
        #expect(await waiting.task.value)
    }

    @Test func shuttingDownReleasesTheReaderAndAdmitsNothingMore() async {
        let gate = DeliveryGate()
        gate.close([first])
        let waiting = await GateReader(gate, first)
        #expect(waiting.isWaiting)
        gate.shutDown()
        #expect(await waiting.task.value == false)
        #expect(await gate.admit(second) == false)
    }
}
