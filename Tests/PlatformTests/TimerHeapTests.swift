// The timer heap pops in deadline order and only what is due.

import Platform
import TestSupport
import Testing

@Suite struct TimerHeapTests {
    @Test func popsInDeadlineOrderAndOnlyWhenDue() {
        var heap = TimerHeap<Int32>()
        for (deadline, stream) in [(50, 1), (10, 3), (30, 5), (10, 7), (20, 9)] {
            heap.push(deadline: UInt64(deadline), Int32(stream))
        }
        #expect(heap.millisecondsUntilNext(now: 0) == 1)  // 10 ns, rounded up to a whole millisecond
        #expect(heap.nextDeadline == 10)
        #expect(heap.popDue(now: 5) == nil)
        var order: [Int32] = []
        while let stream = heap.popDue(now: 100) { order.append(stream) }
        #expect(order == [3, 7, 9, 5, 1])  // ties keep insertion order
        #expect(heap.isEmpty)
        #expect(heap.millisecondsUntilNext(now: 0) == -1)
    }

    /// Pushes and pops interleaved, so that slots are taken, freed and reused, against a sorted reference.
    @Test func interleavedPushesAndPopsMatchASortedReference() {
        var random = SeededGenerator.replayable("TimerHeapTests")
        let seed = random.state
        var heap = TimerHeap<String>()
        var reference: [(deadline: UInt64, sequence: Int, value: String)] = []
        var now: UInt64 = 0
        for sequence in 0..<5_000 {
            if random.next() % 3 != 0 {
                let deadline = now + random.next() % 100
                heap.push(deadline: deadline, "value \(sequence)")
                reference.append((deadline, sequence, "value \(sequence)"))
            } else {
                now += random.next() % 20
                reference.sort { ($0.deadline, $0.sequence) < ($1.deadline, $1.sequence) }
                while let due = heap.popDue(now: now) {
                    #expect(due == reference.removeFirst().value, "seed \(seed)")
                }
                #expect(reference.first.map { $0.deadline > now } ?? true, "seed \(seed)")
            }
            #expect(heap.count == reference.count)
        }
    }
}
