// One event-loop thread: epoll over the connections it owns, woken by an eventfd when another thread hands
// it work. This file holds its state; the selector, the inbox, the iteration and the executor are in
// EventLoop+*.swift.

import CNghttp2
import Glibc
import Platform
import Synchronization

/// One event-loop thread. Everything not marked otherwise runs on that thread only.
final class EventLoop: @unchecked Sendable {
    /// Work handed to the loop from other threads.
    enum Job {
        case submit(HTTP2Connection, HTTP2StreamTicket)
        case cancel(HTTP2Connection, HTTP2StreamTicket)
        case run(@Sendable () -> Void)
        /// Work a caller hands the loop in place of a task (`EventLoopGroup.execute`): it counts against an
        /// iteration's budget as a task does.
        case work(@Sendable () -> Void)
        /// A Swift task that prefers this loop as its executor.
        case task(UnownedJob)
    }

    struct Inbox {
        var jobs: [Job] = []
        /// The loop is (about to be) blocked in epoll_wait and needs the eventfd to wake.
        var sleeping = false
        var stopRequested = false
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var stopped = false
    }

    let index: Int
    /// The loop thread's pthread_self, set when it starts.
    let ownerThread = Atomic<UInt>(0)
    /// True while the loop runs jobs (and so may take submissions inline).
    @exclusivity(unchecked) var runningJobs = false
    /// Tasks a stopping loop runs between two flushes. A running loop flushes once per iteration: a flush
    /// after half of its tasks split each connection's requests over two TLS writes (two syscalls, two
    /// records, and a wake-up more on the server), which on a busy loop cost more CPU per request than it
    /// saved in latency (figures: docs/performance.md).
    static let tasksPerFlush = tasksPerIteration
    /// Tasks run per iteration before the loop polls its sockets again.
    static let tasksPerIteration = 64
    let epollFD: Int32
    let wakeFD: Int32
    let inbox = Mutex(Inbox())

    // Loop-confined state. `@exclusivity(unchecked)`: only the loop thread touches these, so the runtime's
    // dynamic exclusivity checks (a thread-local access set per access) buy nothing on this hot path.
    @exclusivity(unchecked) var connections: [UInt64: HTTP2Connection] = [:]
    @exclusivity(unchecked) var nextRegistration: UInt64 = 1
    @exclusivity(unchecked) var timers = TimerHeap<() -> Void>()
    @exclusivity(unchecked) var nextTick: UInt64 = 0
    @exclusivity(unchecked) var dirty: [HTTP2Connection] = []
    @exclusivity(unchecked) var reports: [HTTP2Connection] = []
    @exclusivity(unchecked) var completions: [(HTTP2StreamTicket, Result<HTTP2Response, any Error>)] = []
    @exclusivity(unchecked) var spareCompletions: [(HTTP2StreamTicket, Result<HTTP2Response, any Error>)] = []
    /// Set at the top of each iteration; good enough as "now" for activity stamps.
    @exclusivity(unchecked) var iterationTime: UInt64 = 0
    /// Shared by all connections of the loop: a read is fully processed before the next one.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// How often connections check deadlines and idle pings; request timeouts fire within this.
    static let tickInterval: UInt64 = 100_000_000
    static let wakeRegistration: UInt64 = 0

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

    func start() {
        do {
            try NamedThread.detached(name: "h2-loop-\(index % 100)") { [self] in self.run() }
        } catch {
            fatalError("\(error): an event loop is needed to send anything")
        }
    }

    /// Whether `thread` (a `pthread_self()`) is this loop's thread.
    func runs(onThread thread: UInt) -> Bool {
        ownerThread.load(ordering: .relaxed) == thread
    }
}
