// Deadlines ordered for a loop that owns them: a binary min-heap, no locks (one thread owns it). The
// HTTP/2 event loop keeps its timers here, the simulator's connections their delayed answers.
//
// The heap orders small keys (deadline, sequence, slot) and the values wait in slots beside it: a
// sift moves 24-byte keys, never a value. The simulator's delayed answers are large structs of
// strings and arrays; sifting them copied every field at each level, and with thousands of answers
// waiting at a long latency that was a visible share of the simulator's time (docs/performance.md).

/// Values due at monotonic-nanosecond deadlines; equal deadlines come out in the order they went in.
public struct TimerHeap<Value> {
    private struct Key {
        var deadline: UInt64
        var sequence: UInt64
        var slot: Int

        func precedes(_ other: Key) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
        }
    }

    private var keys: [Key] = []
    private var slots: [Value?] = []
    /// Slots whose value has been taken, reused before `slots` grows.
    private var freeSlots: [Int] = []
    private var nextSequence: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { keys.isEmpty }
    public var count: Int { keys.count }
    /// The earliest deadline, if any.
    public var nextDeadline: UInt64? { keys.first?.deadline }

    public mutating func push(deadline: UInt64, _ value: Value) {
        let slot: Int
        if let reused = freeSlots.popLast() {
            slot = reused
            slots[slot] = value
        } else {
            slot = slots.count
            slots.append(value)
        }
        keys.append(Key(deadline: deadline, sequence: nextSequence, slot: slot))
        nextSequence &+= 1
        var child = keys.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard keys[child].precedes(keys[parent]) else { break }
            keys.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest value whose deadline is at or before `now`.
    public mutating func popDue(now: UInt64) -> Value? {
        guard let first = keys.first, first.deadline <= now else { return nil }
        let last = keys.removeLast()
        if !keys.isEmpty {
            keys[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < keys.count && keys[left].precedes(keys[smallest]) { smallest = left }
                if right < keys.count && keys[right].precedes(keys[smallest]) { smallest = right }
                if smallest == parent { break }
                keys.swapAt(parent, smallest)
                parent = smallest
            }
        }
        let value = slots[first.slot].take()
        if keys.isEmpty {
            // Nothing waits: give the slots back rather than keep the largest backlog's worth.
            slots.removeAll(keepingCapacity: slots.count <= 1024)
            freeSlots.removeAll(keepingCapacity: freeSlots.count <= 1024)
        } else {
            freeSlots.append(first.slot)
        }
        return value
    }

    /// The poll(2) timeout until the next deadline: -1 (forever) when empty, rounded up to whole ms.
    public func millisecondsUntilNext(now: UInt64) -> Int32 {
        guard let first = keys.first else { return -1 }
        if first.deadline <= now { return 0 }
        let milliseconds = (first.deadline - now + 999_999) / 1_000_000
        return Int32(min(milliseconds, UInt64(Int32.max)))
    }
}
