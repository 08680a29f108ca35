// The project's clocks. The one monotonic clock: nanoseconds for event-loop deadlines, breakers and benches; one vDSO
// call, no allocation. (Swift's ContinuousClock is used where an API takes its instants.)

import Glibc

public enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed point; never goes backwards.
    @inline(__always)
    public static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// Seconds since the same fixed point, for deadlines and intervals kept as Double.
    @inline(__always)
    public static func seconds() -> Double {
        Double(now()) / 1e9
    }
}

/// Wall-clock time (CLOCK_REALTIME), for timestamps people and other systems read; never for intervals,
/// since it jumps when the system time is set.
public enum WallClockTime {
    /// Seconds and nanoseconds since the Unix epoch.
    @inline(__always)
    public static func now() -> (seconds: Int64, nanoseconds: Int64) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return (Int64(spec.tv_sec), Int64(spec.tv_nsec))
    }

    /// Seconds since the Unix epoch as a Double.
    public static func seconds() -> Double {
        let (seconds, nanoseconds) = now()
        return Double(seconds) + Double(nanoseconds) / 1e9
    }

    /// Whole milliseconds since the Unix epoch.
    public static func milliseconds() -> Int64 {
        let (seconds, nanoseconds) = now()
        return seconds * 1000 + nanoseconds / 1_000_000
    }
}
