// Deadlines ordered for a loop that owns them: a binary min-heap, no locks (one thread owns it). The
// HTTP/2 event loop keeps its timers here, the simulator's connections their delayed answers.

/// Values due at monotonic-nanosecond deadlines; equal deadlines come out in the order they went in.
public struct TimerHeap<Value> {
    public struct Entry {
        public var deadline: UInt64
        var sequence: UInt64
        public var value: Value

        func precedes(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
        }
    }

    private var entries: [Entry] = []
    private var nextSequence: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }
    /// The earliest deadline, if any.
    public var nextDeadline: UInt64? { entries.first?.deadline }

    public mutating func push(deadline: UInt64, _ value: Value) {
        entries.append(Entry(deadline: deadline, sequence: nextSequence, value: value))
        nextSequence &+= 1
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].precedes(entries[parent]) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest value whose deadline is at or before `now`.
    public mutating func popDue(now: UInt64) -> Value? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < entries.count && entries[left].precedes(entries[smallest]) { smallest = left }
                if right < entries.count && entries[right].precedes(entries[smallest]) { smallest = right }
                if smallest == parent { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first.value
    }

    /// The poll(2) timeout until the next deadline: -1 (forever) when empty, rounded up to whole ms.
    public func millisecondsUntilNext(now: UInt64) -> Int32 {
        guard let first = entries.first else { return -1 }
        if first.deadline <= now { return 0 }
        let milliseconds = (first.deadline - now + 999_999) / 1_000_000
        return Int32(min(milliseconds, UInt64(Int32.max)))
    }
}
