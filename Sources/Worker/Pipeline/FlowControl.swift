// Bounded memory under any backlog: a cap on records in flight. When the cap is reached the
// pipeline pauses consumption; it resumes once in-flight work drains below a low-water mark, so
// the consumer does not flap between paused and resumed on every record.

/// Decides when to pause and resume consumption from the number of records in flight.
///
/// - Important: Not thread-safe; the pipeline calls it under its lock.
public struct FlowControl: Sendable {
    public enum Action: Sendable, Equatable {
        case none
        case pause
        case resume
    }

    public private(set) var capacity: Int
    public private(set) var lowWaterMark: Int
    public private(set) var inFlight = 0
    public private(set) var isPaused = false

    /// - Parameters:
    ///   - capacity: records in flight at which consumption pauses (at least 1).
    ///   - lowWaterMark: records in flight at or below which it resumes (less than `capacity`).
    public init(capacity: Int, lowWaterMark: Int) {
        precondition(capacity >= 1, "capacity must be at least 1")
        self.capacity = capacity
        self.lowWaterMark = max(0, min(lowWaterMark, capacity - 1))
    }

    /// Moves the cap (the pipeline sizes it from what the APNs pools can carry): pauses at once when the
    /// records in flight reach the new cap, resumes when they are at or below the new low-water mark.
    public mutating func resize(capacity newCapacity: Int, lowWaterMark newLowWaterMark: Int) -> Action {
        capacity = max(1, newCapacity)
        lowWaterMark = max(0, min(newLowWaterMark, capacity - 1))
        if !isPaused && inFlight >= capacity {
            isPaused = true
            return .pause
        }
        if isPaused && inFlight <= lowWaterMark {
            isPaused = false
            return .resume
        }
        return .none
    }

    /// The low-water mark when the configuration sets none: an eighth below the cap. A pause only closes
    /// the gate in front of the consumer (records librdkafka prefetched stay where they are), so resuming
    /// costs nearly nothing, while every record below the cap is one less waiting its round trip: with
    /// the mark at half the cap, the records in flight swung between the two over a 300 ms round trip,
    /// well below what the cap allows on average (docs/performance.md).
    public static func defaultLowWaterMark(capacity: Int) -> Int {
        capacity - max(1, capacity / 8)
    }

    public mutating func recordTaken() -> Action {
        inFlight += 1
        if !isPaused && inFlight >= capacity {
            isPaused = true
            return .pause
        }
        return .none
    }

    public mutating func recordsFinished(_ count: Int = 1) -> Action {
        inFlight -= count
        precondition(inFlight >= 0, "more records finished than taken")
        if isPaused && inFlight <= lowWaterMark {
            isPaused = false
            return .resume
        }
        return .none
    }
}
