// Work handed to a loop from any thread: the locked inbox of jobs, the eventfd that wakes a sleeping
// loop, and stopping, which runs what is queued before the thread exits.

import Glibc
import Synchronization

extension EventLoop {
    /// Hands a job to the loop. Safe from any thread, including the loop itself.
    func enqueue(_ job: Job) {
        // A task running on this loop submits at once: no lock, no extra round, and its frames leave with
        // the loop's next flush. Only while jobs run, never from inside an nghttp2 callback.
        if case .submit(let connection, let ticket) = job, connection.loop === self,
            runs(onThread: UInt(pthread_self())), runningJobs, connection.sessionCallDepth == 0
        {
            connection.submit(ticket)
            return
        }
        let outcome = inbox.withLock { inbox -> EnqueueOutcome in
            if inbox.stopRequested || inbox.stopped { return .refused }
            inbox.jobs.append(job)
            if inbox.sleeping {
                inbox.sleeping = false
                return .wake
            }
            return .queued
        }
        switch outcome {
        case .queued: break
        case .wake: wake()
        case .refused:
            // A stopped loop runs nothing more; a request handed to it must not wait forever.
            switch job {
            case .submit(let connection, let ticket):
                ticket.finish(
                    .failure(
                        HTTP2ClientError(
                            .unprocessed, "the event loop was shut down",
                            endpoint: connection.endpoint)))
            case .task(let task):
                // A task must run somewhere; the global executor takes over from a stopped loop.
                globalConcurrentExecutor.enqueue(ExecutorJob(task))
            case .work(let work):
                // So must a caller's work: it may end what waits for it (a record its pipeline counts).
                Task.detached { work() }
            case .cancel, .run:
                break
            }
        }
    }

    private enum EnqueueOutcome { case queued, wake, refused }

    /// Runs `action` on the loop thread. Safe from any thread.
    func execute(_ action: @escaping @Sendable () -> Void) {
        enqueue(.run(action))
    }

    /// Runs `action` on the loop thread at or soon after `deadline` (MonotonicClock nanoseconds).
    func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void) {
        execute { [self] in self.addTimer(deadline: deadline, action) }
    }

    /// Closes every connection, stops the thread, and returns once it has exited.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyStopped = inbox.withLock { inbox -> Bool in
                if inbox.stopped { return true }
                inbox.stopRequested = true
                inbox.stopWaiters.append(continuation)
                inbox.sleeping = false
                return false
            }
            if alreadyStopped { continuation.resume() } else { wake() }
        }
    }

    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    func finishStop() {
        let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
            inbox.stopped = true
            defer { inbox.stopWaiters = [] }
            return inbox.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
