// The two clocks observability reads, as plain functions so tests can substitute their own:
// monotonic time for ages and intervals, wall time for log timestamps.

import Platform

/// Nanoseconds on the monotonic clock (not affected by wall-clock changes); for ages and intervals.
public typealias MonotonicNanoseconds = @Sendable () -> UInt64

/// The current wall-clock time as (seconds, nanoseconds) since the Unix epoch; for timestamps.
public typealias WallClock = @Sendable () -> (seconds: Int64, nanoseconds: Int64)

public enum SystemClocks {
    /// Platform's monotonic clock, in nanoseconds.
    public static let monotonic: MonotonicNanoseconds = { MonotonicClock.now() }

    /// Platform's wall clock.
    public static let wall: WallClock = { WallClockTime.now() }
}
