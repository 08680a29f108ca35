// Counts requests per device token in fixed windows, for `SimulatorFaults.deviceLimit`: APNs answers 429
// TooManyRequests when "too many requests were made consecutively to the same device token".

import Synchronization

/// - Important: thread-safe; every connection thread asks it.
final class DeviceRequestCounter: Sendable {
    private struct Window {
        var start: Int64
        var requests: Int
    }

    /// Tokens remembered at most; past it, windows that have ended are dropped (a simulator fed many
    /// distinct tokens stays bounded).
    static let capacity = 100_000

    private let windows = Mutex<[String: Window]>([:])

    /// Counts a request to `token` at `now` (milliseconds); true when it is over `limit`.
    func countIsOverLimit(_ token: String, limit: DeviceRequestLimit, now: Int64) -> Bool {
        windows.withLock { windows in
            let windowLength = Int64(limit.windowMilliseconds)
            if var window = windows[token], now - window.start < windowLength {
                window.requests += 1
                windows[token] = window
                return window.requests > limit.requests
            }
            if windows.count >= Self.capacity {
                windows = windows.filter { now - $0.value.start < windowLength }
                if windows.count >= Self.capacity { windows.removeAll() }
            }
            windows[token] = Window(start: now, requests: 1)
            return limit.requests < 1
        }
    }
}
