// The values behind one labelled child of a metric: lock-free atomics, so that bumping a metric on the
// hot path is a single atomic add on a child resolved once in advance.

import Synchronization

/// A monotonically increasing count, one child of a `CounterFamily`.
///
/// - Important: Thread-safe and lock-free. Resolve the child once (`family.labels(...)`) and keep it;
///   `increment` is then one relaxed atomic add.
public final class Counter: Sendable {
    private let count = Atomic<UInt64>(0)

    init() {}

    /// Adds `amount` (default 1).
    public func increment(by amount: UInt64 = 1) {
        count.wrappingAdd(amount, ordering: .relaxed)
    }

    /// The current count.
    public var value: UInt64 { count.load(ordering: .relaxed) }
}

/// A value that goes up and down, one child of a `GaugeFamily`.
///
/// - Important: Thread-safe and lock-free: `set` is an atomic store, `increment`/`decrement` a
///   compare-and-swap loop on the value's bit pattern.
public final class Gauge: Sendable {
    private let bits = Atomic<UInt64>(0.0.bitPattern)

    init() {}

    /// Replaces the value.
    public func set(_ value: Double) {
        bits.store(value.bitPattern, ordering: .relaxed)
    }

    /// Replaces the value with a whole number.
    public func set(_ value: Int) {
        set(Double(value))
    }

    /// Adds `amount` (default 1; negative amounts subtract).
    public func increment(by amount: Double = 1) {
        var current = bits.load(ordering: .relaxed)
        while true {
            let next = (Double(bitPattern: current) + amount).bitPattern
            let (exchanged, original) = bits.weakCompareExchange(
                expected: current, desired: next, successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Subtracts `amount` (default 1).
    public func decrement(by amount: Double = 1) {
        increment(by: -amount)
    }

    /// The current value.
    public var value: Double { Double(bitPattern: bits.load(ordering: .relaxed)) }
}

/// A distribution of observations over fixed buckets, one child of a `HistogramFamily`.
///
/// - Important: Thread-safe and lock-free: an observation is a bucket search over the (few) bounds,
///   one atomic add to the bucket and a compare-and-swap on the sum. A scrape that races an
///   observation may see the bucket before the sum; `_count` is derived from the buckets, so
///   `_count` always equals the `+Inf` bucket.
public final class Histogram: Sendable {
    /// Finite upper bounds, ascending; the `+Inf` bucket is implicit.
    public let upperBounds: [Double]
    // One cell per finite bound plus one for +Inf; each counts only its own interval.
    private let bucketCounts: [AtomicCount]
    private let sumBits = Atomic<UInt64>(0.0.bitPattern)

    init(upperBounds: [Double]) {
        self.upperBounds = upperBounds
        bucketCounts = (0...upperBounds.count).map { _ in AtomicCount() }
    }

    /// Records one observation. NaN is ignored (it has no bucket and would poison the sum).
    public func observe(_ value: Double) {
        guard !value.isNaN else { return }
        var index = 0
        while index < upperBounds.count && value > upperBounds[index] { index += 1 }
        bucketCounts[index].add(1)
        var current = sumBits.load(ordering: .relaxed)
        while true {
            let next = (Double(bitPattern: current) + value).bitPattern
            let (exchanged, original) = sumBits.weakCompareExchange(
                expected: current, desired: next, successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Records a duration in seconds.
    public func observe(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        observe(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Cumulative counts per bound (the last is `+Inf`), the count, and the sum, read once.
    public var snapshot: (cumulativeCounts: [UInt64], count: UInt64, sum: Double) {
        var cumulative: [UInt64] = []
        cumulative.reserveCapacity(bucketCounts.count)
        var running: UInt64 = 0
        for cell in bucketCounts {
            running &+= cell.value
            cumulative.append(running)
        }
        return (cumulative, running, Double(bitPattern: sumBits.load(ordering: .relaxed)))
    }
}

/// An atomic counter in its own object, so that a histogram can keep a variable number of them in an array.
private final class AtomicCount: Sendable {
    private let count = Atomic<UInt64>(0)
    func add(_ amount: UInt64) { count.wrappingAdd(amount, ordering: .relaxed) }
    var value: UInt64 { count.load(ordering: .relaxed) }
}
