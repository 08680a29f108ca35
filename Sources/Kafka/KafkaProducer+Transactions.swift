// Kafka transactions on the producer (configured with a `transactional.id`): its records and a consumer
// group's offsets become visible to read_committed readers together, or not at all.

extension KafkaProducer {
    /// Registers the `transactional.id` with its coordinator, fencing any earlier producer with the same id
    /// and aborting the transaction that one left open. Once, before the first transaction.
    /// - Important: Blocks up to `timeout`: call it from a thread of your own, not from Swift's cooperative pool.
    public func initTransactions(timeout: Duration) throws(KafkaTransactionError) {
        if let error = client.initTransactions(milliseconds: Self.milliseconds(timeout)) { throw error }
    }

    /// Begins a transaction: records sent from now on belong to it. Non-blocking.
    public func beginTransaction() throws(KafkaTransactionError) {
        if let error = client.beginTransaction() { throw error }
    }

    /// Adds the group's next-to-read offsets to the open transaction: they are committed with it.
    /// - Important: Blocks up to `timeout`.
    public func sendOffsetsToTransaction(
        _ nextOffsets: [KafkaTopicPartition: Int64], group: KafkaGroupMetadata, timeout: Duration
    ) throws(KafkaTransactionError) {
        if let error = client.sendOffsetsToTransaction(
            nextOffsets, group: group, milliseconds: Self.milliseconds(timeout))
        {
            throw error
        }
    }

    /// Flushes the transaction's records and commits it. A failed delivery makes this fail abortably.
    /// - Important: Blocks up to `timeout`.
    public func commitTransaction(timeout: Duration) throws(KafkaTransactionError) {
        if let error = client.commitTransaction(milliseconds: Self.milliseconds(timeout)) { throw error }
    }

    /// Aborts the open transaction: its records are never visible to read_committed readers.
    /// - Important: Blocks up to `timeout`.
    public func abortTransaction(timeout: Duration) throws(KafkaTransactionError) {
        if let error = client.abortTransaction(milliseconds: Self.milliseconds(timeout)) { throw error }
    }

    private static func milliseconds(_ timeout: Duration) -> Int32 {
        Int32(clamping: max(1, timeout.wholeMilliseconds))
    }
}

extension KafkaConsumer {
    /// The consumer's group metadata now, for ``KafkaProducer/sendOffsetsToTransaction(_:group:timeout:)``;
    /// take it afresh for each transaction, since it carries the group's generation. Non-blocking.
    public func groupMetadata() -> KafkaGroupMetadata? {
        client.groupMetadata()
    }
}
