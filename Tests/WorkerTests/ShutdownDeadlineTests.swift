// The shutdown's one deadline and its parts, the waits that end at a deadline or at cancellation, and
// the shutdown signal's early actions (a start-up cancelled by a SIGTERM).

import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite struct ShutdownDeadlineTests {
    @Test func thePartsOfTheDeadlineFollowTheDrainWithinTheMargin() {
        let start = ContinuousClock.now
        let deadline = ShutdownDeadline(drainTimeout: 5, startingAt: start)
        #expect(deadline.drainEnds == start + .seconds(5))
        #expect(deadline.commitEnds == start + .seconds(6))
        #expect(deadline.closeEnds == start + .seconds(7))
        #expect(deadline.exitBy == start + .seconds(5) + ShutdownDeadline.margin)
        #expect(ShutdownDeadline.margin == .seconds(3))
        #expect(ShutdownDeadline.seconds(until: start - .seconds(1)) == 0)
    }

    @Test func waitAtMostReturnsNilAtTheDeadlineWhileTheOperationGoesOn() async {
        let finished = Atomic<Bool>(false)
        let result = await waitAtMost(until: .now + .milliseconds(100)) { () -> Int in
            try? await Task.sleep(for: .seconds(30))
            finished.store(true, ordering: .relaxed)
            return 1
        }
        // Broken, it would have waited for the operation: a result of 1, and the operation finished.
        #expect(result == nil)
        let finishedByThen = finished.load(ordering: .relaxed)
        #expect(!finishedByThen, "it returned while the operation went on")
        #expect(await waitAtMost(until: .now + .seconds(5)) { 2 } == 2)
    }

    @Test func unlessCancelledStopsWaitingWhenTheCallerIsCancelled() async {
        let started = Atomic<Bool>(false)
        let waiting = Task {
            await unlessCancelled { () -> Int in
                started.store(true, ordering: .relaxed)
                try? await Task.sleep(for: .seconds(30))
                return 1
            }
        }
        // Cancelled once the operation is under way, so the cancellation must end a wait already begun.
        // The operation's task may start late on a loaded machine (CI once waited over 5 s for it): the
        // timeout only bounds a broken build.
        #expect(await eventually(timeout: .seconds(60)) { started.load(ordering: .relaxed) })
        waiting.cancel()
        // Broken, it would return the operation's 1 once its 30 s are over.
        #expect(await waiting.value == nil)
        #expect(await unlessCancelled { 3 } == 3)
    }

    @Test func aShutdownTriggeredDuringStartUpRunsItsEarlyActionsOnce() async {
        let signal = ShutdownSignal()
        let reasons = Mutex<[String]>([])
        signal.whenTriggered { reason in reasons.withLock { $0.append(reason) } }
        signal.trigger(reason: "SIGTERM")
        signal.trigger(reason: "SIGINT")
        signal.whenTriggered { reason in reasons.withLock { $0.append("late " + reason) } }
        #expect(reasons.withLock { $0 } == ["SIGTERM", "late SIGTERM"])
        #expect(await signal.wait() == "SIGTERM")
    }

    @Test func aStartCancelledByTheShutdownStopsWaitingForIt() async {
        let signal = ShutdownSignal()
        let lookupEnded = Atomic<Bool>(false)
        let starting = Task {
            // Like a topic lookup that the brokers do not answer.
            _ = await unlessCancelled { () -> Bool in
                try? await Task.sleep(for: .seconds(30))
                lookupEnded.store(true, ordering: .relaxed)
                return true
            }
            try Task.checkCancellation()
        }
        signal.whenTriggered { _ in starting.cancel() }
        signal.trigger(reason: "SIGTERM")
        await #expect(throws: CancellationError.self) { try await starting.value }
        let endedByThen = lookupEnded.load(ordering: .relaxed)
        #expect(!endedByThen, "the start-up stopped waiting while the lookup went on")
    }
}
