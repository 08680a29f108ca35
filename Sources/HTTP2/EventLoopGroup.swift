// The set of loop threads a process sends through: it hands each new connection, and each task that
// wants a loop as its executor, to the next loop in turn.

import Synchronization

/// A small fixed set of event-loop threads that run HTTP/2 connections.
///
/// Connections are spread over the loops round-robin. One loop carries a busy process's traffic, so
/// one or two threads suffice for most processes.
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
    /// wake-up, which saves much of the CPU per request on a busy pool.
    ///
    /// - Important: only non-blocking code may run there; a blocked task stalls every connection of
    ///   that loop. Leave blocking or long CPU work on the default executor.
    public func taskExecutor() -> any TaskExecutor {
        next()
    }

    /// Runs `work` on one of the group's loop threads (round-robin), as a task preferring the loop would run,
    /// without being one: for work that starts requests and goes on in their completions. Its requests to
    /// that loop's connections are submitted at once, and it counts against the loop's per-iteration budget.
    ///
    /// - Important: only non-blocking code may run there, as for `taskExecutor()`.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        next().enqueue(.work(work))
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
