// A value set once that any number of parties wait for: the first signal a watcher took, the reason a
// shutdown started. The first `set` wins; waiters and registered actions all get that value.

import Synchronization

/// Holds the first value given to `set`; `wait()` and `whenSet` deliver it, at once if it is already there.
public final class OnceLatch<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [CheckedContinuation<Value, Never>] = []
        var actions: [@Sendable (Value) -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// The value, once set.
    public var value: Value? { state.withLock { $0.value } }

    /// Sets the value if nobody has yet, then runs the registered actions and resumes the waiters, on the
    /// calling thread. Returns whether this call set it.
    @discardableResult
    public func set(_ value: Value) -> Bool {
        typealias Parties = ([CheckedContinuation<Value, Never>], [@Sendable (Value) -> Void])
        let parties = state.withLock { state -> Parties? in
            guard state.value == nil else { return nil }
            state.value = value
            defer {
                state.waiters.removeAll()
                state.actions.removeAll()
            }
            return (state.waiters, state.actions)
        }
        guard let (waiters, actions) = parties else { return false }
        for action in actions { action(value) }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// Runs `action` with the value once it is set (at once, on this thread, if it already is; otherwise on
    /// the thread that sets it).
    public func whenSet(_ action: @escaping @Sendable (Value) -> Void) {
        let value = state.withLock { state -> Value? in
            if state.value == nil { state.actions.append(action) }
            return state.value
        }
        if let value { action(value) }
    }

    /// Suspends until the value is set and returns it.
    public func wait() async -> Value {
        await withCheckedContinuation { continuation in
            let value = state.withLock { state -> Value? in
                if state.value == nil { state.waiters.append(continuation) }
                return state.value
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}
