// The latch a graceful shutdown starts from: SIGTERM/SIGINT (taken through Platform's SignalWatcher) or an
// outside trigger such as the `dev` command's event count fire it once; the services wait on it.

import Platform

/// A one-shot latch a service awaits to learn it should shut down.
public final class ShutdownSignal: Sendable {
    private struct Trigger: Sendable {
        var reason: String
        var at: ContinuousClock.Instant
    }

    private let latch = OnceLatch<Trigger>()

    public init() {}

    public var isTriggered: Bool { latch.value != nil }
    /// When the shutdown was triggered: where its deadline starts.
    public var triggeredAt: ContinuousClock.Instant? { latch.value?.at }

    /// Triggers the shutdown once; later calls are ignored.
    public func trigger(reason: String) {
        latch.set(Trigger(reason: reason, at: .now))
    }

    /// Runs `action` with the reason when the shutdown is triggered (at once if it was already), on the
    /// triggering thread: for work that must stop early, such as a start-up still under way.
    public func whenTriggered(_ action: @escaping @Sendable (String) -> Void) {
        latch.whenSet { action($0.reason) }
    }

    /// Returns the reason once the shutdown is triggered.
    public func wait() async -> String {
        await latch.wait().reason
    }
}
