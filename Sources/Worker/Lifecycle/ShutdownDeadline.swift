// One deadline for a whole shutdown, fixed when the signal comes and passed down: how long in-flight
// work may run, by when Kafka must be committed and left, and by when the process exits whatever is
// still running. Also the watchdog that enforces the last, and waits that end at a deadline.

import Foundation
import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The budget of one shutdown, from the moment it starts.
///
/// `shutdown.drain_timeout` is the drain: in-flight records, and a revoke under way, may finish until
/// ``drainEnds``. The fixed ``margin`` after it is for what must follow even when the drain used all of
/// its time: committing what finished (until ``commitEnds``), leaving the group (``closeEnds``), closing
/// the producer and the APNs connections. At ``exitBy`` the process exits, whatever Kafka is doing.
public struct ShutdownDeadline: Sendable {
    /// What a shutdown may take beyond `shutdown.drain_timeout`: a second each to commit, to leave the
    /// group, and to close the rest.
    public static let margin: Duration = .seconds(3)

    public let started: ContinuousClock.Instant
    public let drainTimeout: Duration

    public init(drainTimeout seconds: Double, startingAt started: ContinuousClock.Instant = .now) {
        self.started = started
        drainTimeout = .milliseconds(Int64((max(0, seconds) * 1000).rounded()))
    }

    /// Until then in-flight records (and revoke waits) may finish.
    public var drainEnds: ContinuousClock.Instant { started.advanced(by: drainTimeout) }
    /// Until then the final commit of what finished may take.
    public var commitEnds: ContinuousClock.Instant { drainEnds.advanced(by: .seconds(1)) }
    /// Until then leaving the consumer group may take; a close still unfinished is abandoned.
    public var closeEnds: ContinuousClock.Instant { drainEnds.advanced(by: .seconds(2)) }
    /// When the process exits, whatever still runs.
    public var exitBy: ContinuousClock.Instant { drainEnds.advanced(by: Self.margin) }

    /// Seconds since the shutdown started.
    public var secondsElapsed: Double { Self.seconds(ContinuousClock.now - started) }

    /// Seconds from now until `instant`, never negative.
    public static func seconds(until instant: ContinuousClock.Instant) -> Double {
        max(0, seconds(instant - .now))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// What a shutdown is doing right now, for the watchdog's last line.
public final class ShutdownProgress: Sendable {
    private let state = Mutex<(started: Bool, stage: String)>((false, "running"))

    public init() {}

    /// Whether a shutdown has begun.
    public var hasStarted: Bool { state.withLock { $0.started } }
    public var stage: String { state.withLock { $0.stage } }

    /// Marks the shutdown as begun, at `stage`.
    public func enter(_ stage: String) {
        state.withLock { $0 = (true, stage) }
    }
}

/// Ends the process at a deadline unless cancelled first: the guarantee that a shutdown is bounded
/// even when a blocking call (librdkafka's close with the brokers gone) never returns.
///
/// - Important: it waits on a thread of its own, not on the cooperative pool, so that it fires even if
///   every thread of the pool were blocked.
public final class ShutdownWatchdog: Sendable {
    private let cancelled = DispatchSemaphore(value: 0)

    /// - Parameter onExpiry: runs on the watchdog's thread at `deadline` (log and flush there); then the
    ///   process exits with `exitCode` without running exit handlers.
    public init(deadline: ContinuousClock.Instant, exitCode: Int32, onExpiry: @escaping @Sendable () -> Void) {
        let cancelled = self.cancelled
        do {
            try NamedThread.detached(name: "shutdown-watchdog") {
                let milliseconds = Int((ShutdownDeadline.seconds(until: deadline) * 1000).rounded(.up))
                if cancelled.wait(timeout: .now() + .milliseconds(milliseconds)) == .success { return }
                onExpiry()
                _exit(exitCode)
            }
        } catch {
            // Without a watchdog the shutdown would be unbounded: refuse to go on without one.
            fatalError("\(error): the shutdown deadline needs its watchdog")
        }
    }

    public func cancel() {
        cancelled.signal()
    }
}

/// Runs `operation` in a task of its own and waits for it until `deadline`. Returns nil if it has not
/// finished by then; it then goes on in the background (for calls that cannot be cancelled, such as
/// closing a client whose brokers are gone).
public func waitAtMost<T: Sendable>(
    until deadline: ContinuousClock.Instant, _ operation: @escaping @Sendable () async -> T
) async -> T? {
    await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        let first = ResumeOnce(continuation)
        Task { first.resume(returning: await operation()) }
        Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            first.resume(returning: nil)
        }
    }
}

/// Runs `operation` in a task of its own and waits for it unless the calling task is cancelled first;
/// returns nil then (the operation goes on in the background).
public func unlessCancelled<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T? {
    let first = Mutex<ResumeOnce<T?>?>(nil)
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let result = ResumeOnce(continuation)
            first.withLock { $0 = result }
            if Task.isCancelled { result.resume(returning: nil) }
            Task { result.resume(returning: await operation()) }
        }
    } onCancel: {
        first.withLock { $0 }?.resume(returning: nil)
    }
}
