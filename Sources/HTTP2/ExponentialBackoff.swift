// Exponential back-off with full jitter, shared by reconnects and request retries.

/// Delays that grow exponentially with each consecutive failure, capped, with "full jitter":
/// the delay before attempt `n` is uniform in `0 ... min(maximum, initial * multiplier^(n-1))`,
/// so clients that failed together do not come back together.
public struct ExponentialBackoff: Sendable, Hashable {
    /// The ceiling of the first delay. Default: 100 ms.
    public var initial: Duration
    /// The largest ceiling. Default: 30 s.
    public var maximum: Duration
    /// Growth per failure. Default: 2.
    public var multiplier: Double

    public init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(30), multiplier: Double = 2) {
        precondition(initial >= .zero && maximum >= initial && multiplier >= 1, "backoff needs 0 <= initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
    }

    /// The upper bound of the delay after `failures` consecutive failures (1 = the first).
    public func ceiling(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let initialSeconds = initial.seconds
        let exponent = Double(min(failures - 1, 64))
        let grown = initialSeconds * pow2(multiplier, exponent)
        return Duration.seconds(min(grown, maximum.seconds))
    }

    /// A random delay in `0 ... ceiling(afterFailures:)`.
    public func delay(afterFailures failures: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterFailures: failures, using: &generator)
    }

    public func delay(afterFailures failures: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceiling = ceiling(afterFailures: failures).seconds
        guard ceiling > 0 else { return .zero }
        return .seconds(Double.random(in: 0...ceiling, using: &generator))
    }

    private func pow2(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 && result < 1e12 {
            result *= base
            remaining -= 1
        }
        return result
    }
}
