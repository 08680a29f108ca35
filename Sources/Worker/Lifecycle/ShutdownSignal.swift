// Turns process signals into events the worker observes: SIGTERM/SIGINT start a graceful drain,
// SIGHUP asks for a rules reload. Signals are taken through a dispatch source, never a raw handler,
// so the handling code may lock and allocate.
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Delivers selected signals to a closure on a private queue.
///
/// - Important: Create it before the signals can arrive; it ignores their default action.
public final class SignalWatcher: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>

    /// - Parameter handler: called with the signal number, on a private serial queue.
    public init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "apns-worker.signals")
        var made: [any DispatchSourceSignal] = []
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(number) }
            source.resume()
            made.append(source)
        }
        sources = Mutex(made)
    }

    public func cancel() {
        sources.withLock { sources in
            for source in sources { source.cancel() }
            sources.removeAll()
        }
    }

    deinit { cancel() }
}

/// A one-shot latch a service awaits to learn it should shut down.
public final class ShutdownSignal: Sendable {
    private struct State {
        var triggered = false
        var triggeredAt: ContinuousClock.Instant?
        var reason: String?
        var waiters: [CheckedContinuation<String, Never>] = []
        var actions: [@Sendable (String) -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var isTriggered: Bool { state.withLock { $0.triggered } }
    /// When the shutdown was triggered: where its deadline starts.
    public var triggeredAt: ContinuousClock.Instant? { state.withLock { $0.triggeredAt } }

    /// Triggers the shutdown once; later calls are ignored.
    public func trigger(reason: String) {
        typealias Parties = ([CheckedContinuation<String, Never>], [@Sendable (String) -> Void])
        let (waiters, actions) = state.withLock { state -> Parties in
            guard !state.triggered else { return ([], []) }
            state.triggered = true
            state.triggeredAt = .now
            state.reason = reason
            defer {
                state.waiters.removeAll()
                state.actions.removeAll()
            }
            return (state.waiters, state.actions)
        }
        for action in actions { action(reason) }
        for waiter in waiters { waiter.resume(returning: reason) }
    }

    /// Runs `action` with the reason when the shutdown is triggered (at once if it was already), on the
    /// triggering thread: for work that must stop early, such as a start-up still under way.
    public func whenTriggered(_ action: @escaping @Sendable (String) -> Void) {
        let reason = state.withLock { state -> String? in
            if state.triggered { return state.reason ?? "" }
            state.actions.append(action)
            return nil
        }
        if let reason { action(reason) }
    }

    /// Returns the reason once the shutdown is triggered.
    public func wait() async -> String {
        await withCheckedContinuation { continuation in
            let reason = state.withLock { state -> String? in
                if state.triggered { return state.reason ?? "" }
                state.waiters.append(continuation)
                return nil
            }
            if let reason { continuation.resume(returning: reason) }
        }
    }
}
