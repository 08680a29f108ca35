// Keeps one failure repeated thousands of times a second from flooding the log: per message key, the
// first few lines of each interval pass, the rest are counted and reported in one summary line.

/// Per-key rate limiting of log lines. Pure logic over a monotonic time the caller passes in.
///
/// - Important: Not thread-safe; `LogWriter` keeps it behind its lock.
struct LogRateLimiter {
    /// Lines of one key allowed per interval.
    let burst: Int
    let intervalNanoseconds: UInt64
    /// Keys tracked at once; past it, lines of new keys pass untracked rather than grow the table.
    let maximumKeys: Int

    struct Window {
        var startedAt: UInt64
        var emitted: Int
        var suppressed: Int
        var level: LogLevel
    }

    /// Lines held back for a key whose interval has ended.
    struct Suppression: Equatable {
        var key: String
        var count: Int
        var level: LogLevel
    }

    enum Decision: Equatable {
        /// Write the line; first write `summary` if the key's previous interval held lines back.
        case emit(summary: Suppression?)
        case suppress
    }

    private(set) var windows: [String: Window] = [:]

    init(burst: Int, interval: Duration, maximumKeys: Int = 4096) {
        self.burst = max(1, burst)
        intervalNanoseconds = max(1, interval.nanosecondsClamped)
        self.maximumKeys = max(1, maximumKeys)
    }

    mutating func decide(key: String, level: LogLevel, now: UInt64) -> Decision {
        if var window = windows[key] {
            if now &- window.startedAt < intervalNanoseconds {
                if window.emitted < burst {
                    window.emitted += 1
                    windows[key] = window
                    return .emit(summary: nil)
                }
                window.suppressed += 1
                window.level = max(window.level, level)
                windows[key] = window
                return .suppress
            }
            let summary =
                window.suppressed > 0
                ? Suppression(key: key, count: window.suppressed, level: window.level) : nil
            windows[key] = Window(startedAt: now, emitted: 1, suppressed: 0, level: level)
            return .emit(summary: summary)
        }
        if windows.count >= maximumKeys {
            windows = windows.filter { now &- $0.value.startedAt < intervalNanoseconds || $0.value.suppressed > 0 }
            if windows.count >= maximumKeys { return .emit(summary: nil) }
        }
        windows[key] = Window(startedAt: now, emitted: 1, suppressed: 0, level: level)
        return .emit(summary: nil)
    }

    /// Ends every interval that is over: returns the summaries owed and forgets those keys.
    mutating func sweep(now: UInt64) -> [Suppression] {
        var summaries: [Suppression] = []
        for (key, window) in windows where now &- window.startedAt >= intervalNanoseconds {
            if window.suppressed > 0 {
                summaries.append(Suppression(key: key, count: window.suppressed, level: window.level))
            }
            windows.removeValue(forKey: key)
        }
        return summaries.sorted { $0.key < $1.key }
    }
}
