// The two clocks observability reads, as plain functions so tests can substitute their own:
// monotonic time for ages and intervals, wall time for log timestamps.

import Glibc

/// Nanoseconds on the monotonic clock (not affected by wall-clock changes); for ages and intervals.
public typealias MonotonicNanoseconds = @Sendable () -> UInt64

/// The current wall-clock time as (seconds, nanoseconds) since the Unix epoch; for timestamps.
public typealias WallClock = @Sendable () -> (seconds: Int64, nanoseconds: Int64)

public enum SystemClocks {
    /// `CLOCK_MONOTONIC` in nanoseconds.
    public static let monotonic: MonotonicNanoseconds = {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// `CLOCK_REALTIME`.
    public static let wall: WallClock = {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return (Int64(time.tv_sec), Int64(time.tv_nsec))
    }
}

extension Duration {
    /// Whole nanoseconds, saturating at `UInt64.max`; negative durations become 0.
    var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, multiplyOverflowed) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, addOverflowed) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return multiplyOverflowed || addOverflowed ? .max : total
    }
}
