// The process's one way to take signals: the worker's SIGTERM/SIGINT drain and SIGHUP reload, the
// simulator's and kafka-mock's stop, the bench's cleanup of the h2o it started. Signals are taken through
// a dispatch source, never a raw handler, so the handling code may lock and allocate.

import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Takes selected signals from the moment it is made: each goes to the handler (if any) on a private
/// serial queue, and the first one is kept for `waitForFirst()`.
///
/// - Important: Create it before the signals can arrive; it ignores their default action, also after
///   `cancel()`.
public final class SignalWatcher: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>
    private let first: FirstSignal

    /// - Parameter handler: called with the signal number, on a private serial queue, for every signal.
    public init(signals: [Int32], handler: (@Sendable (Int32) -> Void)? = nil) {
        let queue = DispatchQueue(label: "apns-worker.signals")
        let first = FirstSignal()
        var made: [any DispatchSourceSignal] = []
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                first.received(number)
                handler?(number)
            }
            source.resume()
            made.append(source)
        }
        self.first = first
        sources = Mutex(made)
    }

    /// Suspends until one of the signals has arrived and returns the first that did (at once if one
    /// already has). Any number of callers get the same answer.
    public func waitForFirst() async -> Int32 {
        await first.wait()
    }

    /// Stops delivering; the signals stay ignored.
    public func cancel() {
        sources.withLock { sources in
            for source in sources { source.cancel() }
            sources.removeAll()
        }
    }

    deinit { cancel() }
}

/// The first signal a watcher took, and the tasks waiting for it.
private final class FirstSignal: Sendable {
    private struct State {
        var number: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Mutex(State())

    func received(_ number: Int32) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            guard state.number == nil else { return [] }
            state.number = number
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: number) }
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let number = state.withLock { state -> Int32? in
                if let number = state.number { return number }
                state.waiters.append(continuation)
                return nil
            }
            if let number { continuation.resume(returning: number) }
        }
    }
}
