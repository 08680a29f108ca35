// Lets a test prove that a task is suspended, not merely slow: the task runs on this executor's thread,
// and once everything enqueued has run, the task is parked until something wakes it. Waking it enqueues
// it again at once, so an unchanged count proves that nothing woke it.

import Foundation
import Synchronization

/// A task executor with a thread of its own that counts the jobs it is given and has run.
///
/// Start the task under test with `Task(executorPreference: executor)`.
/// - Important: call `stop()` when done; the thread ends after the jobs enqueued before it.
package final class ObservedTaskExecutor: TaskExecutor, @unchecked Sendable {
    private struct State {
        var queue: [UnownedJob] = []
        var enqueued = 0
        var completed = 0
        var stopped = false
    }

    private let state = Mutex(State())
    private let wakeUp = DispatchSemaphore(value: 0)

    package init() {
        let thread = Thread { [self] in runJobs() }
        thread.name = "observed-executor"
        thread.start()
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        state.withLock {
            $0.queue.append(unowned)
            $0.enqueued += 1
        }
        wakeUp.signal()
    }

    /// Jobs handed to the executor so far: a task's start and every wake-up after a suspension.
    package var jobsEnqueued: Int { state.withLock { $0.enqueued } }

    /// True once at least one job ran and every job enqueued has run: the executor's tasks are
    /// finished or suspended.
    package var isIdle: Bool { state.withLock { $0.completed > 0 && $0.completed == $0.enqueued } }

    package func stop() {
        state.withLock { $0.stopped = true }
        wakeUp.signal()
    }

    private func runJobs() {
        while true {
            wakeUp.wait()
            let next = state.withLock { state -> UnownedJob?? in
                if !state.queue.isEmpty { return state.queue.removeFirst() }
                return state.stopped ? .some(nil) : nil
            }
            guard let next else { continue }
            guard let job = next else { return }
            job.runSynchronously(on: asUnownedTaskExecutor())
            state.withLock { $0.completed += 1 }
        }
    }
}
