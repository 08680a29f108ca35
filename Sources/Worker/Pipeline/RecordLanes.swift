// Long-lived tasks that process records one after another, instead of a new task per record.
//
// A task costs more than its creation: the runtime mallocs a 1 KiB allocator slab for the task's first
// async frame and frees it when the task ends, and sets up and tears down its executor preference; with a
// task per record (and a task group per multi-device event) that machinery was a visible share of an
// event loop's time in `bench pipeline` (docs/performance.md). A lane keeps its task, its slab and its
// executor, and waits for its next record on a continuation.

import Synchronization

/// Runs a handler for every submitted item, each on a lane: a task that takes items one at a time and
/// waits, suspended, when it has none. Lanes start on demand, up to `maximumLanes`, and then live until
/// `stop()`; items beyond that many at once each get a task of their own, so nothing ever queues here.
///
/// - Important: Thread-safe. `submit` never blocks and never suspends: call it from any thread.
final class RecordLanes<Item: Sendable>: Sendable {
    typealias Handler = @Sendable (Item) async -> Void

    private struct State {
        /// Lanes waiting for an item, the most recently idle last.
        var idle: [UnsafeContinuation<Item?, Never>] = []
        /// Set once by `start`: the owner whose method handles items holds the lanes, so it is not yet
        /// initialized when they are made.
        var handler: Handler?
        var lanesStarted = 0
        var lanesRunning = 0
        var oneOffTasks = 0
        var stopped = false
    }

    private enum Action {
        case resume(UnsafeContinuation<Item?, Never>)
        case startLane(Handler)
        case oneOff(Handler)
    }

    private let executor: (@Sendable () -> any TaskExecutor)?
    private let maximumLanes: Int
    private let state = Mutex(State())

    /// - Parameters:
    ///   - maximumLanes: lanes kept at most.
    ///   - executor: the executor each new lane (and each one-off task) prefers; nil for the global one.
    init(maximumLanes: Int, executor: (@Sendable () -> any TaskExecutor)?) {
        self.maximumLanes = max(1, maximumLanes)
        self.executor = executor
    }

    /// Sets what processes an item (on the lane's task). Call once, before the first `submit`.
    func start(handler: @escaping Handler) {
        state.withLock { $0.handler = handler }
    }

    /// Hands `item` to an idle lane (the most recently idle: its caches are warm), or starts a lane, or,
    /// with every lane busy, a task of its own.
    func submit(_ item: Item) {
        let action = state.withLock { state -> Action in
            if let lane = state.idle.popLast() { return .resume(lane) }
            guard let handler = state.handler else { preconditionFailure("RecordLanes.submit before start") }
            if !state.stopped && state.lanesStarted < maximumLanes {
                state.lanesStarted += 1
                state.lanesRunning += 1
                return .startLane(handler)
            }
            state.oneOffTasks += 1
            return .oneOff(handler)
        }
        switch action {
        case .resume(let lane):
            lane.resume(returning: item)
        case .startLane(let handler):
            Task(executorPreference: executor?()) { await self.runLane(first: item, handler: handler) }
        case .oneOff(let handler):
            Task(executorPreference: executor?()) { await handler(item) }
        }
    }

    /// Ends idle lanes now and busy ones after their current item. Items submitted later get tasks of
    /// their own.
    func stop() {
        let idle = state.withLock { state -> [UnsafeContinuation<Item?, Never>] in
            state.stopped = true
            defer { state.idle = [] }
            return state.idle
        }
        for lane in idle { lane.resume(returning: nil) }
    }

    /// Lanes started so far, lanes whose task is still running, and items that got a task of their own.
    var counts: (lanesStarted: Int, lanesRunning: Int, oneOffTasks: Int) {
        state.withLock { ($0.lanesStarted, $0.lanesRunning, $0.oneOffTasks) }
    }

    /// Lanes waiting for an item now.
    var idleCount: Int { state.withLock { $0.idle.count } }

    private func runLane(first: Item, handler: @escaping Handler) async {
        var pending: Item? = first
        while true {
            // The item's scope ends before the wait: an idle lane holds no record.
            if let item = pending.take() { await handler(item) } else { break }
            pending = await nextItem()
        }
        state.withLock { $0.lanesRunning -= 1 }
    }

    private func nextItem() async -> Item? {
        await withUnsafeContinuation { lane in
            let stopped = state.withLock { state -> Bool in
                if state.stopped { return true }
                state.idle.append(lane)
                return false
            }
            if stopped { lane.resume(returning: nil) }
        }
    }
}
