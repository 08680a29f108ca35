// Duration in the units the loops and metrics count in.

extension Duration {
    /// The duration in seconds as a Double.
    public var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    /// Whole nanoseconds, saturating at `UInt64.max`; negative durations become 0.
    public var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, multiplyOverflowed) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, addOverflowed) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return multiplyOverflowed || addOverflowed ? .max : total
    }
}
