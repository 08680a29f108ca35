// The timer heap pops in deadline order and only what is due.

import Platform
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
}
