// What exactly-once mode holds between a record's finish and its transaction: each record's results, per
// partition, and the partition's committable offset (the next offset after its contiguous finished prefix).
// A transaction takes the held results of records before that offset and the offset itself, so that the
// results committed always match the offset committed: a crash redoes exactly the records whose results
// were not committed.

/// Held results and committable offsets per partition, and the batches that transactions take from them.
///
/// - Important: Not thread-safe; its owner serialises access.
struct TransactionLedger<Token> {
    struct Held {
        var offset: Int64
        var outputs: [OutboundRecord]
        var token: Token
    }

    /// What one transaction writes: results in partition and offset order, and the offsets to commit.
    struct Batch {
        var records: [OutboundRecord] = []
        var nextOffsets: [TopicPartition: Int64] = [:]
        /// The records whose results the batch carries, for `committed(_:)`.
        var held: [TopicPartition: Int] = [:]
        var heldRecords: Int { held.values.reduce(0, +) }
    }

    private var held: [TopicPartition: [Held]] = [:]
    private var committableOffsets: [TopicPartition: Int64] = [:]
    private var committedOffsets: [TopicPartition: Int64] = [:]
    /// Records whose results are held (committed or dropped ones no longer count).
    private(set) var heldRecords = 0
    /// Held records before their partition's committable offset: what the next transaction would take.
    private(set) var readyRecords = 0

    mutating func hold(_ outputs: [OutboundRecord], partition: TopicPartition, offset: Int64, token: Token) {
        // Records finish in any order: kept sorted by offset, with the newest usually last.
        var entries = held[partition, default: []]
        var index = entries.endIndex
        while index > entries.startIndex && entries[index - 1].offset > offset { index -= 1 }
        entries.insert(Held(offset: offset, outputs: outputs, token: token), at: index)
        held[partition] = entries
        heldRecords += 1
        if let committable = committableOffsets[partition], offset < committable { readyRecords += 1 }
    }

    /// Notes a partition's committable offset; it only moves forward.
    mutating func committable(_ partition: TopicPartition, nextOffset: Int64) {
        let previous = committableOffsets[partition] ?? Int64.min
        guard nextOffset > previous else { return }
        committableOffsets[partition] = nextOffset
        for entry in held[partition, default: []] where entry.offset >= previous && entry.offset < nextOffset {
            readyRecords += 1
        }
    }

    /// The next transaction's content, or nil when no offset moved since the last committed one.
    func nextBatch() -> Batch? {
        var batch = Batch()
        for (partition, nextOffset) in committableOffsets.sorted(by: { $0.key.description < $1.key.description }) {
            guard nextOffset > committedOffsets[partition] ?? Int64.min else { continue }
            batch.nextOffsets[partition] = nextOffset
            let entries = held[partition, default: []]
            var count = 0
            while count < entries.count && entries[count].offset < nextOffset {
                batch.records.append(contentsOf: entries[count].outputs)
                count += 1
            }
            batch.held[partition] = count
        }
        return batch.nextOffsets.isEmpty ? nil : batch
    }

    /// The batch was committed: its records stop being held; returns their tokens.
    mutating func committed(_ batch: Batch) -> [Token] {
        var tokens: [Token] = []
        for (partition, nextOffset) in batch.nextOffsets {
            // A partition released meanwhile was dropped already, its tokens with it.
            guard committableOffsets[partition] != nil else { continue }
            committedOffsets[partition] = max(committedOffsets[partition] ?? Int64.min, nextOffset)
            let count = batch.held[partition] ?? 0
            guard count > 0, var entries = held[partition] else { continue }
            tokens.append(contentsOf: entries.prefix(count).map(\.token))
            entries.removeFirst(count)
            held[partition] = entries.isEmpty ? nil : entries
            heldRecords -= count
            readyRecords -= count
        }
        return tokens
    }

    /// Forgets `partitions` (revoked): returns the tokens of the results held for them, now dropped.
    mutating func release(_ partitions: [TopicPartition]) -> [Token] {
        var tokens: [Token] = []
        for partition in partitions {
            let entries = held.removeValue(forKey: partition) ?? []
            let committable = committableOffsets.removeValue(forKey: partition)
            committedOffsets.removeValue(forKey: partition)
            heldRecords -= entries.count
            if let committable { readyRecords -= entries.count { $0.offset < committable } }
            tokens.append(contentsOf: entries.map(\.token))
        }
        return tokens
    }
}
