// The project's one monotonic clock: nanoseconds for event-loop deadlines, breakers and benches; one vDSO
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
