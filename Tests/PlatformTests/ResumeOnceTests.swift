// The first resume wins and later ones are ignored, whoever makes them.

import Platform
import Testing

@Suite struct ResumeOnceTests {
    @Test func theFirstResumeIsDeliveredAndLaterOnesAreIgnored() async {
        let value: Int = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            once.resume(returning: 1)
            once.resume(returning: 2)  // would trap if it reached the continuation
        }
        #expect(value == 1)
    }

    @Test func racingResumersDeliverExactlyOneValue() async {
        for _ in 0..<200 {
            let value: Int = await withCheckedContinuation { continuation in
                let once = ResumeOnce(continuation)
                for index in 0..<4 {
                    Task.detached { once.resume(returning: index) }
                }
            }
            #expect((0..<4).contains(value))
        }
    }
}
