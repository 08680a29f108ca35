// A sender taking back the pushes it still has waiting: a worker whose Kafka partition went to another
// worker, or that is stopping, must not send that partition's pushes after it let go of the records (their
// next owner sends them), nor keep the rebalance or the shutdown waiting for a pool that is down.

import Synchronization

/// Withdraws the pushes of one sender that have not gone out yet. A push sent with it that is waiting
/// (for its pool's breaker, a retry's delay, or its device's pace) ends unsent as `withdrawn` once
/// `withdraw()` is called, within the breaker's tick (100 ms); an attempt already on its way to APNs
/// finishes as it would have, and no new one starts.
///
/// A sender's work that has not begun when it withdraws may still begin: a withdrawal takes back what
/// waits, not what can go at once. `close()` says the sender let go of its work altogether (its
/// partition's next owner has it now), and the sender then begins nothing more with this withdrawal.
///
/// - Important: thread-safe; `withdraw()` and `close()` may come from any thread, once or more.
public final class SendWithdrawal: Sendable {
    private let withdrawn = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)

    public init() {}

    public func withdraw() { withdrawn.store(true, ordering: .releasing) }

    public var isWithdrawn: Bool { withdrawn.load(ordering: .acquiring) }

    /// Withdraws, and marks the sender's work as let go: nothing begins with this withdrawal any more.
    public func close() {
        withdraw()
        closed.store(true, ordering: .releasing)
    }

    /// Whether `close()` was called: work not begun by then must not begin.
    public var isClosed: Bool { closed.load(ordering: .acquiring) }

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
