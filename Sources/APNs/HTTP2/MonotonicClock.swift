// Nanosecond monotonic time for the event loop's deadlines: one vDSO call, no allocation.
import Glibc

enum MonotonicClock {
    /// Nanoseconds since an arbitrary fixed point; never goes backwards.
    @inline(__always)
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}
