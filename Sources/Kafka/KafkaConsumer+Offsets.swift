// Offsets are the consumer's promise of what is finished: stored as records finish, committed in the
// background, on demand or before partitions move; and the lag the position leaves behind.

extension KafkaConsumer {
    /// Stores the offset to commit for a partition: `nextOffset` is the offset of the NEXT record to
    /// read, i.e. the last finished record's offset + 1. It is committed later (within `commitInterval` or
    /// `commitAfterRecords` when set, auto-commit, ``commit()``, revoke, close). Non-blocking; any thread.
    ///
    /// - Throws: ``KafkaError/Code/offsetStore`` if the partition is not assigned to this consumer
    ///   (any more), so a late store after a revoke cannot move the group's offset.
    public func storeOffset(topic: String, partition: Int32, nextOffset: Int64) throws(KafkaError) {
        try storeOffsets([KafkaTopicPartition(topic: topic, partition: partition): nextOffset])
    }

    /// Stores several next-to-read offsets at once; see ``storeOffset(topic:partition:nextOffset:)``.
    public func storeOffsets(_ nextOffsets: [KafkaTopicPartition: Int64]) throws(KafkaError) {
        guard !nextOffsets.isEmpty else { return }
        try client.storeOffsets(nextOffsets)
        promptCommits?.noteStored(nextOffsets)
    }

    /// Commits the stored offsets of the current assignment and waits for the broker's answer.
    /// The blocking call runs on a dedicated thread. Succeeds when nothing new was stored.
    public func commit() async throws(KafkaError) {
        let client = client
        try await DedicatedThread.run(name: "kafka-commit") { () throws(KafkaError) in
            try Self.commitStored(client)
        }
    }

    /// Commits the stored offsets like ``commit()``, but waits only until `deadline`.
    /// - Throws: ``KafkaError/Code/timeout`` when the broker has not answered by then (the commit may
    ///   still complete later), or the commit's error.
    public func commit(deadline: ContinuousClock.Instant) async throws(KafkaError) {
        let client = client
        let started = ContinuousClock.now
        let done: Void? = try await DedicatedThread.run(name: "kafka-commit", until: deadline) {
            () throws(KafkaError) in try Self.commitStored(client)
        }
        guard done != nil else {
            throw KafkaError(
                code: .timeout,
                message: "committing stored offsets got no answer within "
                    + "\(ContinuousClock.now - started) (\(core.status))")
        }
    }

    private static func commitStored(_ client: RDKafkaClient) throws(KafkaError) {
        if let response = client.commitStoredOffsets(blocking: true) {
            throw KafkaError(.commit, "committing stored offsets", response: response)
        }
    }

    /// Starts committing the stored offsets and returns at once. A failure (like that of a background
    /// auto-commit) is reported to the event handler as ``KafkaEvent/error(_:)`` with code
    /// ``KafkaError/Code/commit``.
    public func scheduleCommit() throws(KafkaError) {
        if let response = client.commitStoredOffsets(blocking: false) {
            throw KafkaError(.commit, "scheduling a commit", response: response)
        }
    }

    /// The group's committed offsets (next offset to read) for `partitions`, asked of the broker.
    /// Partitions without a committed offset are absent. The blocking call runs on a dedicated thread.
    public func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        let client = client
        return try await DedicatedThread.run(name: "kafka-committed") { () throws(KafkaError) in
            try KafkaCommittedOffsets.query(client: client, partitions: partitions, timeout: timeout)
        }
    }

    /// Lag per assigned partition from librdkafka's local view: the position (next record to hand
    /// out) against the high watermark of the last fetch. Non-blocking; no broker call.
    public func partitionLags() throws(KafkaError) -> [KafkaPartitionLag] {
        try client.assignment(withPositions: true).map { entry in
            KafkaPartitionLag(
                topicPartition: entry.topicPartition,
                position: entry.offset >= 0 ? entry.offset : nil,
                highWatermark: client.cachedHighWatermark(of: entry.topicPartition)
            )
        }.sorted { $0.topicPartition < $1.topicPartition }
    }
}
