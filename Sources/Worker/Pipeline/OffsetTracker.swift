// Tracks which records of each partition are finished, so that the offset we store never passes a
// record whose results are not yet safely in Kafka, while records of one partition finish in any
// order (the parallel-consumer approach: commit the highest contiguous finished offset).

/// A Kafka topic and partition.
public struct TopicPartition: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)[\(partition)]" }
}

/// Per-partition bookkeeping of records in flight.
///
/// - Important: Not thread-safe; its owner serialises access (the pipeline keeps it under one lock).
public struct OffsetTracker: Sendable {
    /// Records of one partition in the order they were taken; offsets increase but may have gaps
    /// (compaction, transaction markers), so entries are searched, not indexed by offset.
    struct PartitionLedger: Sendable {
        let generation: UInt64
        var offsets: [Int64] = []
        var finished: [Bool] = []
        /// Index of the oldest entry still kept; entries before it were finished and dropped.
        var head = 0
        /// The next offset to read after everything finished so far (what Kafka calls the
        /// committed offset), or nil until a record of the partition finished.
        var committable: Int64?
        var unfinished = 0

        var lastTaken: Int64?

        /// Takes `offset`; returns the generation it belongs to, or nil when it is not past the last one taken.
        mutating func take(_ offset: Int64) -> UInt64? {
            if let lastTaken, offset <= lastTaken { return nil }
            lastTaken = offset
            offsets.append(offset)
            finished.append(false)
            unfinished += 1
            return generation
        }

        /// Marks `offset` finished; returns the new committable offset when it moved forward, how many
        /// records that released (this one and finished ones that were waiting behind it), and whether
        /// it was unfinished until now. Nil when the record is of another generation than `generation`.
        mutating func finish(_ offset: Int64, generation: UInt64) -> (
            committable: Int64?, released: Int, wasUnfinished: Bool
        )? {
            guard generation == self.generation else { return nil }
            guard let index = indexOf(offset), !finished[index] else { return (nil, 0, false) }
            finished[index] = true
            unfinished -= 1
            let before = head
            while head < offsets.count && finished[head] {
                committable = offsets[head] + 1
                head += 1
            }
            let released = head - before
            compactIfWorthwhile()
            return (released > 0 ? committable : nil, released, true)
        }

        /// Records taken and not yet committable: what a crash now would make the next owner redo.
        var held: Int { offsets.count - head }

        func indexOf(_ offset: Int64) -> Int? {
            var low = head
            var high = offsets.count - 1
            while low <= high {
                let middle = (low + high) / 2
                if offsets[middle] == offset { return middle }
                if offsets[middle] < offset { low = middle + 1 } else { high = middle - 1 }
            }
            return nil
        }

        /// Drops the finished prefix once it is at least half the storage, keeping work amortised O(1).
        mutating func compactIfWorthwhile() {
            guard head > 64 && head * 2 >= offsets.count else { return }
            offsets.removeFirst(head)
            finished.removeFirst(head)
            head = 0
        }

        var oldestUnfinished: Int64? { head < offsets.count ? offsets[head] : nil }
    }

    private var ledgers: [TopicPartition: PartitionLedger] = [:]
    private var nextGeneration: UInt64 = 1
    public private(set) var unfinishedCount = 0

    public init() {}

    /// Records that the pipeline took `offset` of `partition`. Returns the partition's generation,
    /// which `finish` must be given back, or nil for an offset at or below one already taken (a
    /// redelivery the pipeline must not track twice).
    ///
    /// A generation starts when a partition is first seen after `forget`, so that work abandoned
    /// at a revoke, finishing late, can never mark a record of a later assignment finished.
    public mutating func take(_ partition: TopicPartition, offset: Int64) -> UInt64? {
        // One lookup for a partition already seen (every record but its first); its ledger changed in place.
        var slot = ledgers.index(forKey: partition)
        if slot == nil {
            ledgers[partition] = PartitionLedger(generation: nextGeneration)
            nextGeneration += 1
            slot = ledgers.index(forKey: partition)
        }
        // A mutating call changes the ledger where it lies; reading a field through `ledgers.values[slot]`
        // copies the whole ledger out, retaining and releasing its two arrays.
        guard let slot, let generation = ledgers.values[slot].take(offset) else { return nil }
        unfinishedCount += 1
        return generation
    }

    /// Marks a record finished. Returns the offset to store (next offset to read) when the
    /// partition's contiguous finished prefix grew, else nil.
    public mutating func finish(_ partition: TopicPartition, offset: Int64, generation: UInt64) -> Int64? {
        finishReleasing(partition, offset: offset, generation: generation).committable
    }

    /// Like `finish`, also saying how many records stopped being held: this one and the finished
    /// records that waited behind it, or 1 for a record of a partition forgotten since it was taken.
    public mutating func finishReleasing(_ partition: TopicPartition, offset: Int64, generation: UInt64)
        -> (committable: Int64?, released: Int)
    {
        // Changed in place by one mutating call, found by one lookup: a ledger copied out of the dictionary
        // shares its arrays with the stored one, so marking a record finished copied them whole, every
        // offset the partition held, per record; and each field read through `ledgers.values[slot]` copies
        // the ledger out, retaining and releasing both arrays.
        guard let slot = ledgers.index(forKey: partition),
            let result = ledgers.values[slot].finish(offset, generation: generation)
        else { return (nil, 1) }
        if result.wasUnfinished { unfinishedCount -= 1 }
        return (result.committable, result.released)
    }

    /// Whether `generation` is the partition's current one (it was not forgotten since the record was taken).
    public func isCurrent(_ partition: TopicPartition, generation: UInt64) -> Bool {
        self.generation(of: partition) == generation
    }

    /// Records of `partition` taken and not yet committable (finished ones waiting behind an unfinished one
    /// included).
    public func held(_ partition: TopicPartition) -> Int { reading(partition) { $0.held } ?? 0 }

    /// The offset that may be committed for `partition`: the next offset after the finished prefix.
    public func committableOffset(_ partition: TopicPartition) -> Int64? {
        reading(partition) { $0.committable } ?? nil
    }

    /// How many records of `partition` are taken and not finished.
    public func unfinished(_ partition: TopicPartition) -> Int { reading(partition) { $0.unfinished } ?? 0 }

    /// The generation of the partition's records now; nil when it has none (never taken, or forgotten).
    public func generation(of partition: TopicPartition) -> UInt64? { reading(partition) { $0.generation } }

    /// The oldest record of `partition` not yet finished, which holds back its offset.
    public func oldestUnfinished(_ partition: TopicPartition) -> Int64? {
        reading(partition) { $0.oldestUnfinished } ?? nil
    }

    /// Reads the partition's ledger where it lies. The dictionary's subscript hands out a copy, whose two
    /// arrays were retained and released for every question asked: one per record taken (`held`) and per
    /// record finished (`running`).
    private func reading<Answer>(_ partition: TopicPartition, _ read: (borrowing PartitionLedger) -> Answer) -> Answer?
    {
        guard let slot = ledgers.index(forKey: partition) else { return nil }
        return read(ledgers.values[slot])
    }

    /// Forgets a partition (after it was revoked); returns how many of its records were unfinished
    /// (they still run and report with `finishReleasing`) and how many finished ones it was holding.
    @discardableResult
    public mutating func forget(_ partition: TopicPartition) -> (unfinished: Int, heldFinished: Int) {
        guard let ledger = ledgers.removeValue(forKey: partition) else { return (0, 0) }
        unfinishedCount -= ledger.unfinished
        return (ledger.unfinished, ledger.held - ledger.unfinished)
    }

    public var partitions: [TopicPartition] { Array(ledgers.keys) }
}
