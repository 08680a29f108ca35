// One loop iteration: poll sockets, run a bounded share of queued jobs and tasks, fire timers and ticks,
// then flush every dirty connection once, report freed streams and resume callers, in that order, so
// that one write and one wake-up serve many streams.

import CNghttp2
import Glibc
import Platform

extension EventLoop {
    // MARK: Batching, for connections (loop thread)

    /// Asks for `connection.flush()` before the loop next sleeps.
    func markDirty(_ connection: HTTP2Connection) {
        guard !connection.isQueuedForFlush else { return }
        connection.isQueuedForFlush = true
        dirty.append(connection)
    }

    /// Asks for `connection.reportFinishedStreams()` at the end of this iteration.
    func markNeedsReport(_ connection: HTTP2Connection) {
        guard !connection.isQueuedForReport else { return }
        connection.isQueuedForReport = true
        reports.append(connection)
    }

    /// Resumes the ticket's caller at the end of this iteration, after writes are flushed.
    func complete(_ ticket: HTTP2StreamTicket, _ result: Result<HTTP2Response, any Error>) {
        completions.append((ticket, result))
    }

    func addTimer(deadline: UInt64, _ action: @escaping () -> Void) {
        timers.push(deadline: deadline, action)
    }

    // MARK: The loop

    func run() {
        ownerThread.store(UInt(pthread_self()), ordering: .relaxed)
        let capacity = 128
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        var jobs: [Job] = []
        /// Jobs before this index already ran; those after it wait for the next iteration.
        var nextJob = 0
        var timeout: Int32 = 0
        while true {
            let count = epoll_wait(epollFD, events, Int32(capacity), timeout)
            iterationTime = MonotonicClock.now()
            if count > 0 {
                for slot in 0..<Int(count) {
                    let registration = events[slot].data.u64
                    if registration == Self.wakeRegistration {
                        var value: UInt64 = 0
                        _ = Glibc.read(wakeFD, &value, 8)
                    } else if let connection = connections[registration] {
                        connection.handleEvents(events[slot].events)
                    }
                }
            }

            var stopRequested = false
            // A few rounds, so that tasks run here can submit requests that go out in this iteration's flush.
            // At most `tasksPerIteration` tasks run before the loop polls its sockets again: tasks that
            // prefer this loop as executor do real work (a worker's whole pipeline), and a long queue of
            // them must not keep responses unread (and their callers waiting) for that long. The rest stay
            // queued, in order, for the next iteration.
            var taskBudget = Self.tasksPerIteration
            for _ in 0..<4 {
                if nextJob == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    nextJob = 0
                    stopRequested = inbox.withLock { inbox -> Bool in
                        swap(&inbox.jobs, &jobs)
                        return inbox.stopRequested
                    }
                    if jobs.isEmpty { break }
                }
                // A stopping loop runs everything it holds: nothing queued here may be left behind.
                runJobs(&jobs, from: &nextJob, taskBudget: &taskBudget, unbounded: stopRequested)
                if taskBudget <= 0 { break }
            }
            if nextJob < jobs.count, !stopRequested {
                stopRequested = inbox.withLock { $0.stopRequested }
                if stopRequested { runJobs(&jobs, from: &nextJob, taskBudget: &taskBudget, unbounded: true) }
            }

            runDueTimers()
            if nextTick != 0, iterationTime >= nextTick {
                for connection in Array(connections.values) { connection.tick(now: iterationTime) }
                nextTick = connections.isEmpty ? 0 : iterationTime + Self.tickInterval
            }
            if stopRequested {
                for connection in Array(connections.values) {
                    connection.close(
                        HTTP2ClientError(
                            .connectionClosed, "the event loop was shut down",
                            endpoint: connection.endpoint))
                }
            }
            finishIteration()
            if stopRequested {
                finishStop()
                return
            }

            let hasWork =
                nextJob < jobs.count
                || inbox.withLock { inbox -> Bool in
                    if inbox.jobs.isEmpty && !inbox.stopRequested {
                        inbox.sleeping = true
                        return false
                    }
                    return true
                }
            timeout = hasWork ? 0 : sleepTimeout()
        }
    }

    /// Runs `jobs` from `nextJob` on, until the task budget is spent unless `unbounded`.
    private func runJobs(_ jobs: inout [Job], from nextJob: inout Int, taskBudget: inout Int, unbounded: Bool) {
        runningJobs = true
        defer { runningJobs = false }
        var tasksSinceFlush = 0
        while nextJob < jobs.count && (taskBudget > 0 || unbounded) {
            let job = jobs[nextJob]
            nextJob += 1
            switch job {
            case .submit(let connection, let ticket):
                connection.submit(ticket)
                continue
            case .cancel(let connection, let ticket):
                connection.cancel(ticket)
                continue
            case .run(let action):
                action()
                continue
            case .work(let work): work()
            case .task(let task): task.runSynchronously(on: asUnownedTaskExecutor())
            }
            // A task, or a caller's work in place of one, ran: it counts against the budget.
            taskBudget -= 1
            // Only a stopping loop, which runs everything it holds, flushes as it goes rather than piling it
            // all up; a bounded run ends within the budget, and the iteration's own flush follows.
            guard unbounded else { continue }
            tasksSinceFlush += 1
            if tasksSinceFlush == Self.tasksPerFlush {
                tasksSinceFlush = 0
                flushDirty()
            }
        }
    }

    /// Flushes dirty connections, then tells pools about freed streams, then resumes callers.
    private func flushDirty() {
        var index = 0
        while index < dirty.count {
            let connection = dirty[index]
            connection.isQueuedForFlush = false
            connection.flush()
            index += 1
        }
        dirty.removeAll(keepingCapacity: true)
    }

    private func finishIteration() {
        while !dirty.isEmpty || !reports.isEmpty || !completions.isEmpty {
            flushDirty()
            var index = 0
            while index < reports.count {
                let connection = reports[index]
                connection.isQueuedForReport = false
                connection.reportFinishedStreams()
                index += 1
            }
            reports.removeAll(keepingCapacity: true)
            // Swap with the spare buffer: resuming callers may add completions (never on this thread, but
            // keep the loop simple) and neither array reallocates.
            swap(&completions, &spareCompletions)
            // Each response moved out to its ticket, in the order it came (reversed in the buffer, whose swaps
            // move, then popped from the end): read from the array, each was copied (a retain and a release
            // for the ticket and for each of the response's buffers) and then destroyed with the array.
            spareCompletions.withUnsafeMutableBufferPointer { $0.reverse() }
            while let (ticket, result) = spareCompletions.popLast() { ticket.finish(result) }
        }
    }

    private func sleepTimeout() -> Int32 {
        var deadline = UInt64.max
        if nextTick != 0 { deadline = nextTick }
        if let next = timers.nextDeadline { deadline = min(deadline, next) }
        if deadline == UInt64.max { return -1 }
        let now = MonotonicClock.now()
        if deadline <= now { return 0 }
        return Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
    }

    private func runDueTimers() {
        while let action = timers.popDue(now: iterationTime) { action() }
    }
}
