// The latch a graceful shutdown starts from: SIGTERM/SIGINT (taken through Platform's SignalWatcher) or an
// outside trigger such as the `dev` command's event count fire it once; the services wait on it.

import Platform
import Synchronization

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
