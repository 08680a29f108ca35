// The I/O threads: each EventLoop is one thread running epoll over the connections it owns, woken by an
// eventfd when another thread hands it work. Writes are batched per wake-up; completions are delivered
// after the batch so one lock and one flush serve many streams.
import CNghttp2
import Foundation
import Glibc
import Platform
import Synchronization

/// A small fixed set of event-loop threads that run HTTP/2 connections.
///
/// Connections are spread over the loops round-robin. One loop can drive well over 100,000 requests
/// a second, so one or two threads suffice for most processes.
///
/// - Important: thread-safe. Call `shutdown()` once you are done with a group you created; the shared
///   group lives as long as the process.
public final class EventLoopGroup: Sendable {
    /// A process-wide group of one loop thread, started on first use.
    public static let shared = EventLoopGroup(threadCount: 1)

    let loops: [EventLoop]
    private let nextLoop = Atomic<Int>(0)

    /// Starts `threadCount` loop threads (at least 1).
    public init(threadCount: Int = 1) {
        let count = max(1, threadCount)
        loops = (0..<count).map { EventLoop(index: $0) }
        for loop in loops { loop.start() }
    }

    /// A task executor that runs tasks on one of the group's loop threads (round-robin).
    ///
    /// Tasks that mostly send requests (`withTaskExecutorPreference(group.taskExecutor()) { ... }`) then
    /// run on the thread that does their I/O: submitting and resuming need no thread hand-off and no
    /// wake-up, which roughly halves the CPU per request on a busy pool.
    ///
    /// - Important: only non-blocking code may run there; a blocked task stalls every connection of
    ///   that loop. Leave blocking or long CPU work on the default executor.
    public func taskExecutor() -> any TaskExecutor {
        next()
    }

    /// The loop the next connection should live on.
    func next() -> EventLoop {
        let index = nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[index % loops.count]
    }

    /// Closes every connection still open (failing their streams) and stops the threads.
    public func shutdown() async {
        for loop in loops {
            await loop.stop()
        }
    }
}

extension EventLoop: TaskExecutor {
    /// Runs a task job on the loop thread, in the loop's next round of jobs.
    func enqueue(_ job: consuming ExecutorJob) {
        enqueue(.task(UnownedJob(job)))
    }
}

/// One event-loop thread. Everything not marked otherwise runs on that thread only.
final class EventLoop: @unchecked Sendable {
    /// Work handed to the loop from other threads.
    enum Job {
        case submit(HTTP2Connection, HTTP2StreamTicket)
        case cancel(HTTP2Connection, HTTP2StreamTicket)
        case run(@Sendable () -> Void)
        /// A Swift task that prefers this loop as its executor.
        case task(UnownedJob)
    }

    private struct Inbox {
        var jobs: [Job] = []
        /// The loop is (about to be) blocked in epoll_wait and needs the eventfd to wake.
        var sleeping = false
        var stopRequested = false
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var stopped = false
    }

    let index: Int
    /// The loop thread's pthread_self, set when it starts.
    private let ownerThread = Atomic<UInt>(0)
    /// True while the loop runs jobs (and so may take submissions inline).
    @exclusivity(unchecked) private var runningJobs = false
    /// Tasks run between two flushes while jobs run.
    private static let tasksPerFlush = 32
    /// Tasks run per iteration before the loop polls its sockets again.
    private static let tasksPerIteration = 64
    private let epollFD: Int32
    private let wakeFD: Int32
    private let inbox = Mutex(Inbox())

    // Loop-confined state. `@exclusivity(unchecked)`: only the loop thread touches these, so the runtime's
    // dynamic exclusivity checks (a thread-local access set per access) buy nothing on this hot path.
    @exclusivity(unchecked) private var connections: [UInt64: HTTP2Connection] = [:]
    @exclusivity(unchecked) private var nextRegistration: UInt64 = 1
    @exclusivity(unchecked) private var timers = TimerHeap<() -> Void>()
    @exclusivity(unchecked) private var nextTick: UInt64 = 0
    @exclusivity(unchecked) private var dirty: [HTTP2Connection] = []
    @exclusivity(unchecked) private var reports: [HTTP2Connection] = []
    @exclusivity(unchecked) private var completions: [(HTTP2StreamTicket, Result<HTTP2Response, any Error>)] = []
    @exclusivity(unchecked) private var spareCompletions: [(HTTP2StreamTicket, Result<HTTP2Response, any Error>)] = []
    /// Set at the top of each iteration; good enough as "now" for activity stamps.
    @exclusivity(unchecked) private(set) var iterationTime: UInt64 = 0
    /// Shared by all connections of the loop: a read is fully processed before the next one.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// How often connections check deadlines and idle pings; request timeouts fire within this.
    static let tickInterval: UInt64 = 100_000_000
    private static let wakeRegistration: UInt64 = 0

    init(index: Int) {
        self.index = index
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(epollFD >= 0 && wakeFD >= 0, "cannot create epoll or eventfd: \(String(cString: strerror(errno)))")
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeRegistration
        epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
    }

    deinit {
        Glibc.close(epollFD)
        Glibc.close(wakeFD)
        readBuffer.deallocate()
    }

    fileprivate func start() {
        do {
            try NamedThread.detached(name: "apns-h2-loop-\(index % 100)") { [self] in self.run() }
        } catch {
            fatalError("\(error): an event loop is needed to send anything")
        }
    }

    /// Whether `thread` (a `pthread_self()`) is this loop's thread.
    func runs(onThread thread: UInt) -> Bool {
        ownerThread.load(ordering: .relaxed) == thread
    }

    // MARK: Cross-thread entry points

    /// Hands a job to the loop. Safe from any thread, including the loop itself.
    func enqueue(_ job: Job) {
        // A task running on this loop submits at once: no lock, no extra round, and its frames leave with
        // the next flush below. Only while jobs run, never from inside an nghttp2 callback.
        if case .submit(let connection, let ticket) = job, connection.loop === self,
            runs(onThread: UInt(pthread_self())), runningJobs
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
                ticket.finish(.failure(HTTP2ClientError(.unprocessed, "the event loop was shut down",
                    endpoint: connection.endpoint)))
            case .task(let task):
                // A task must run somewhere; the global executor takes over from a stopped loop.
                globalConcurrentExecutor.enqueue(ExecutorJob(task))
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

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    // MARK: Loop-thread API for connections

    /// Registers a connection; returns its epoll registration id.
    func register(_ connection: HTTP2Connection) -> UInt64 {
        let id = nextRegistration
        nextRegistration += 1
        connections[id] = connection
        if nextTick == 0 { nextTick = MonotonicClock.now() + Self.tickInterval }
        return id
    }

    func unregister(_ registration: UInt64) {
        connections[registration] = nil
    }

    /// Adds or changes the epoll interest of `fd`.
    func watch(fd: Int32, registration: UInt64, readable: Bool, writable: Bool, add: Bool) {
        var event = epoll_event()
        event.events = (readable ? EPOLLIN.rawValue : 0) | (writable ? EPOLLOUT.rawValue : 0)
            | EPOLLRDHUP.rawValue
        event.data.u64 = registration
        epoll_ctl(epollFD, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event)
    }

    func unwatch(fd: Int32) {
        var event = epoll_event()
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
    }

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

    private func run() {
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
                    connection.close(HTTP2ClientError(.connectionClosed, "the event loop was shut down",
                        endpoint: connection.endpoint))
                }
            }
            finishIteration()
            if stopRequested {
                finishStop()
                return
            }

            let hasWork = nextJob < jobs.count || inbox.withLock { inbox -> Bool in
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
            case .submit(let connection, let ticket): connection.submit(ticket)
            case .cancel(let connection, let ticket): connection.cancel(ticket)
            case .run(let action): action()
            case .task(let task):
                task.runSynchronously(on: asUnownedTaskExecutor())
                taskBudget -= 1
                // Let the server start on the first requests while later tasks still render theirs.
                tasksSinceFlush += 1
                if tasksSinceFlush == Self.tasksPerFlush {
                    tasksSinceFlush = 0
                    flushDirty()
                }
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
            for index in spareCompletions.indices {
                let (ticket, result) = spareCompletions[index]
                ticket.finish(result)
            }
            spareCompletions.removeAll(keepingCapacity: true)
        }
    }

    private func finishStop() {
        let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
            inbox.stopped = true
            defer { inbox.stopWaiters = [] }
            return inbox.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
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
