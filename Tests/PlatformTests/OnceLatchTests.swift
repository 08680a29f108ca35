// The first value set is the one every waiter and action gets, whenever it registered.

import Platform
import Synchronization
import Testing

@Suite struct OnceLatchTests {
    @Test func theFirstValueReachesEarlyAndLateWaitersAndActions() async {
        let latch = OnceLatch<Int>()
        let early = Mutex<[Int]>([])
        latch.whenSet { value in early.withLock { $0.append(value) } }
        let waiter = Task { await latch.wait() }
        #expect(latch.value == nil)
        #expect(latch.set(1))
        #expect(!latch.set(2))
        #expect(await waiter.value == 1)
        #expect(await latch.wait() == 1)
        let late = Mutex<[Int]>([])
        latch.whenSet { value in late.withLock { $0.append(value) } }
        #expect(early.withLock { $0 } == [1])
        #expect(late.withLock { $0 } == [1])
        #expect(latch.value == 1)
    }
}
