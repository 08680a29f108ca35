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
    private let first: OnceLatch<Int32>

    /// - Parameter handler: called with the signal number, on a private serial queue, for every signal.
    public init(signals: [Int32], handler: (@Sendable (Int32) -> Void)? = nil) {
        let queue = DispatchQueue(label: "apns-worker.signals")
        let first = OnceLatch<Int32>()
        var made: [any DispatchSourceSignal] = []
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                first.set(number)
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
