// A sender taking back the pushes it still has waiting: a worker whose Kafka partition went to another
// worker, or that is stopping, must not send that partition's pushes after it let go of the records (their
// next owner sends them), nor keep the rebalance or the shutdown waiting for a pool that is down.

import Synchronization

/// Withdraws the pushes of one sender that have not gone out yet. A push sent with it that is waiting
/// (for its pool's breaker, a retry's delay, or its device's pace) ends unsent as `withdrawn` once
/// `withdraw()` is called, within the breaker's tick (100 ms); an attempt already on its way to APNs
/// finishes as it would have, and no new one starts.
///
/// - Important: thread-safe; `withdraw()` may come from any thread, once or more.
public final class SendWithdrawal: Sendable {
    private let withdrawn = Atomic<Bool>(false)

    public init() {}

    public func withdraw() { withdrawn.store(true, ordering: .releasing) }

    public var isWithdrawn: Bool { withdrawn.load(ordering: .acquiring) }

    /// Sleeps for `duration`, or until withdrawn (checked every 100 ms); false when it was withdrawn.
    /// Throws `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration) async throws -> Bool {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: duration)
        while !isWithdrawn {
            let left = clock.now.duration(to: end)
            if left <= .zero { return true }
            try await Task.sleep(for: min(left, .milliseconds(100)))
        }
        return false
    }
}
