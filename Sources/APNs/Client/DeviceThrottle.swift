// APNs answers 429 TooManyRequests when "too many requests were made consecutively to the same device
// token": a limit per device, not per connection or provider. Backing off only the refused push (its own
// retry delay) would leave every other push to that device going out at full rate, each refused in turn:
// the worker would hammer the one device while its retries pile up, and waiters woken together would
// all be refused again. So the client paces each device APNs throttled, AIMD on its rate: every push to
// it, retries and new pushes alike, takes the next slot; a 429 halves the device's rate (and honours
// Retry-After), each delivery adds one push a second, and a device back at full rate is forgotten. As in
// TCP, the rate is halved once per round: 429s for pushes sent before the last decrease were answers
// to the old rate, so a burst's refusals arriving together do not halve it again and again. A decrease
// also voids the slots taken at the old rate: a push waiting for one takes a new slot when it wakes, so
// that what goes out after a decrease is spaced at the new rate (else those pushes, refused in turn,
// would each halve the rate again).
// Devices APNs never throttled pay one atomic load per push.

import Platform
import Synchronization

/// Paces pushes to the devices APNs answered 429 TooManyRequests for.
///
/// - Important: thread-safe. `isThrottled` with no device throttled is a single atomic load.
public final class DeviceThrottle: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Pushes a second to a device after its first 429. Default: 10.
        public var rateAfterFirstRefusal = 10.0
        /// The slowest pace: one push this often. Default: one a minute.
        public var slowestRate = 1.0 / 60
        /// Pushes a second at which a device counts as unthrottled again and is forgotten. Default: 100.
        public var releaseRate = 100.0
        /// Devices remembered at most; beyond it the one idle longest is forgotten (its next 429 starts
        /// over). Bounds memory whatever a storm does. Default: 10,000.
        public var capacity = 10_000

        public init() {}
    }

    private struct Pace {
        /// Pushes a second this device is allowed now.
        var rate: Double
        /// The earliest start of the next push (monotonic nanoseconds).
        var nextSlot: UInt64
        /// When a push to it was last let through or refused, for forgetting the idlest.
        var lastUsed: UInt64
        /// When the rate was last halved: refusals of pushes sent before it do not halve it again.
        var lastDecrease: UInt64
        /// Counts the decreases: a slot taken in an earlier one is void.
        var epoch: UInt64 = 0
        /// No push before this (APNs' Retry-After), whatever the rate.
        var notBefore: UInt64 = 0
    }

    /// A reserved slot: wait `delay`, then check `isCurrent` before sending.
    public struct Slot: Sendable {
        public let delay: Duration
        let token: String
        let epoch: UInt64
    }

    public let configuration: Configuration
    private let paces = Mutex<[String: Pace]>([:])
    private let throttledCount = Atomic<Int>(0)

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Devices being paced now (for metrics).
    public var throttledDevices: Int { throttledCount.load(ordering: .relaxed) }

    /// Whether pushes to `token` are paced.
    public func isThrottled(_ token: String) -> Bool {
        guard throttledCount.load(ordering: .relaxed) > 0 else { return false }
        return paces.withLock { $0[token] != nil }
    }

    /// Takes the next slot for a push to `token`: how long to wait before sending it (zero when the
    /// device is not paced, or its slot is now). `now`: monotonic nanoseconds, for tests.
    public func reserveSlot(for token: String, now: UInt64? = nil) -> Slot {
        guard throttledCount.load(ordering: .relaxed) > 0 else { return Slot(delay: .zero, token: token, epoch: 0) }
        let now = now ?? MonotonicClock.now()
        return paces.withLock { paces -> Slot in
            guard var pace = paces[token] else { return Slot(delay: .zero, token: token, epoch: 0) }
            let start = max(now, pace.nextSlot, pace.notBefore)
            pace.nextSlot = start &+ Self.interval(pace.rate)
            pace.lastUsed = now
            paces[token] = pace
            return Slot(delay: .nanoseconds(Int64(clamping: start &- now)), token: token, epoch: pace.epoch)
        }
    }

    /// Whether a slot reserved earlier still stands: false once the device's rate was cut since (take a
    /// new one). A device forgotten meanwhile is no longer paced: its slot stands.
    public func isCurrent(_ slot: Slot) -> Bool {
        paces.withLock { paces in
            guard let pace = paces[slot.token] else { return true }
            return pace.epoch == slot.epoch
        }
    }

    /// APNs answered 429 TooManyRequests for `token` to a push sent at `sentAt` (monotonic nanoseconds;
    /// nil: now): halve its rate unless that push went out before the last decrease, and start no push to
    /// it before `retryAfter` (when APNs said).
    public func refused(_ token: String, retryAfter: Duration?, sentAt: UInt64? = nil, now: UInt64? = nil) {
        let now = now ?? MonotonicClock.now()
        let sentAt = sentAt ?? now
        paces.withLock { paces in
            var pace: Pace
            if let known = paces[token] {
                pace = known
                if sentAt >= pace.lastDecrease {
                    pace.rate = max(configuration.slowestRate, pace.rate / 2)
                    pace.lastDecrease = now
                    pace.epoch &+= 1
                    // The slots taken at the old rate are void; the next goes one new interval from now.
                    pace.nextSlot = now
                }
            } else {
                if paces.count >= configuration.capacity { forgetIdlest(&paces) }
                pace = Pace(rate: configuration.rateAfterFirstRefusal, nextSlot: now, lastUsed: now, lastDecrease: now)
            }
            // The next push waits at least one interval at the new rate from this refusal.
            pace.nextSlot = max(pace.nextSlot, now &+ Self.interval(pace.rate))
            if let retryAfter, retryAfter > .zero {
                pace.notBefore = max(pace.notBefore, now &+ retryAfter.nanosecondsClamped)
            }
            pace.lastUsed = now
            paces[token] = pace
            throttledCount.store(paces.count, ordering: .relaxed)
        }
    }

    /// APNs accepted a push to `token`: one more push a second; forgotten once back at `releaseRate`.
    public func delivered(_ token: String) {
        guard throttledCount.load(ordering: .relaxed) > 0 else { return }
        paces.withLock { paces in
            guard var pace = paces[token] else { return }
            pace.rate += 1
            if pace.rate >= configuration.releaseRate {
                paces[token] = nil
            } else {
                paces[token] = pace
            }
            throttledCount.store(paces.count, ordering: .relaxed)
        }
    }

    private func forgetIdlest(_ paces: inout [String: Pace]) {
        guard let idlest = paces.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key else { return }
        paces[idlest] = nil
    }

    private static func interval(_ rate: Double) -> UInt64 {
        UInt64(min(3.6e12, 1e9 / max(rate, 1e-9)))
    }
}
