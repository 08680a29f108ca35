// Owns an rd_kafka_topic_partition_list_t and reads C lists into Swift values.

internal import CRdKafka

/// One entry of a C topic-partition list.
struct RDKafkaPartitionEntry {
    var topicPartition: KafkaTopicPartition
    var offset: Int64
    var error: rd_kafka_resp_err_t
}

/// Owns one `rd_kafka_topic_partition_list_t`.
final class RDKafkaTopicPartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(_ partitions: some Collection<KafkaTopicPartition>, offset: Int64 = Int64(RD_KAFKA_OFFSET_INVALID)) {
        pointer = rd_kafka_topic_partition_list_new(Int32(clamping: max(1, partitions.count)))
        for partition in partitions {
            rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition).pointee.offset = offset
        }
    }

    init(offsets: some Collection<(KafkaTopicPartition, Int64)>) {
        pointer = rd_kafka_topic_partition_list_new(Int32(clamping: max(1, offsets.count)))
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition).pointee.offset = offset
        }
    }

    /// Takes ownership of a list librdkafka handed out (for example from `rd_kafka_assignment`).
    init(taking pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        self.pointer = pointer
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    var entries: [RDKafkaPartitionEntry] { Self.entries(of: pointer) }

    static func entries(of list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [RDKafkaPartitionEntry] {
        let count = Int(list.pointee.cnt)
        guard count > 0, let elements = list.pointee.elems else { return [] }
        return (0..<count).map { index in
            let element = elements[index]
            return RDKafkaPartitionEntry(
                topicPartition: KafkaTopicPartition(
                    topic: String(cString: element.topic), partition: element.partition
                ),
                offset: element.offset, error: element.err
            )
        }
    }

    static func partitions(of list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [KafkaTopicPartition] {
        entries(of: list).map(\.topicPartition)
    }

    /// The first per-partition error in the list, described with its partition.
    func firstError(_ code: KafkaError.Code, _ context: String) -> KafkaError? {
        guard let failed = entries.first(where: { $0.error != RD_KAFKA_RESP_ERR_NO_ERROR }) else { return nil }
        return KafkaError(code, "\(context) \(failed.topicPartition)", response: failed.error)
    }
}
