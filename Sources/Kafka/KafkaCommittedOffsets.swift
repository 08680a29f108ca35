// Reads a consumer group's committed offsets from the broker, without joining the group.

/// Reads the offsets a consumer group has committed, for tests and tools.
public enum KafkaCommittedOffsets {
    /// The committed offsets (the next offset the group will read) of `groupID` for `partitions`.
    /// Partitions without a committed offset are absent from the result.
    ///
    /// Uses a short-lived consumer handle that does not join the group. The blocking call runs on a
    /// dedicated thread.
    /// - Throws: ``KafkaError/Code/invalidConfiguration`` or ``KafkaError/Code/query``.
    public static func read(
        groupID: String, partitions: [KafkaTopicPartition], configuration: KafkaConfiguration,
        timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        try await DedicatedThread.run(name: "kafka-committed") { () throws(KafkaError) in
            let properties = configuration.librdkafkaProperties(with: [
                ("group.id", groupID), ("enable.auto.commit", "false"),
            ])
            let callbacks = RDKafkaCallbacks(eventHandler: nil, redactor: SecretRedactor(properties: properties))
            let client = try RDKafkaClient.make(.consumer, properties: properties, callbacks: callbacks)
            return try query(client: client, partitions: partitions, timeout: timeout)
        }
    }

    /// Blocking: asks the group coordinator.
    static func query(
        client: RDKafkaClient, partitions: [KafkaTopicPartition], timeout: Duration
    ) throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        try client.committedOffsets(for: partitions, timeout: timeout)
    }
}
