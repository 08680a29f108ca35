// One rebalance as librdkafka's rebalance callback reports it, with the calls that apply it. It holds
// the callback's C list, so it is valid only while the callback runs (on the consumer's poll thread).

internal import CRdKafka

/// A rebalance being served: what changed and how to tell librdkafka it was applied.
struct RDKafkaRebalance {
    enum Kind {
        case assign
        case revoke
        /// The rebalance failed; the assignment should be dropped.
        case failed(RDKafkaResponse)
    }

    let kind: Kind
    /// The partitions assigned or revoked (for a failure, those librdkafka listed, possibly none).
    let partitions: [KafkaTopicPartition]
    /// Whether the group uses the COOPERATIVE protocol (incremental changes) rather than EAGER.
    let isCooperative: Bool
    let handle: RDKafkaHandle
    private let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(
        handle: OpaquePointer, code: rd_kafka_resp_err_t, list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        switch code {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS: kind = .assign
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS: kind = .revoke
        default: kind = .failed(RDKafkaResponse(code))
        }
        partitions = RDKafkaTopicPartitionList.partitions(of: list)
        isCooperative = String(cString: rd_kafka_rebalance_protocol(handle)) == "COOPERATIVE"
        self.handle = RDKafkaHandle(pointer: handle)
        self.list = list
    }

    /// Whether a revoke is because the group went on without this member (the assignment was lost).
    var isAssignmentLost: Bool { rd_kafka_assignment_lost(handle.pointer) != 0 }

    /// COOPERATIVE: adds this rebalance's partitions to the assignment.
    func incrementalAssign(_ context: String) -> KafkaError? {
        guard let error = rd_kafka_incremental_assign(handle.pointer, list) else { return nil }
        return KafkaError(.rebalance, context, consuming: error)
    }

    /// COOPERATIVE: removes this rebalance's partitions from the assignment.
    func incrementalUnassign(_ context: String) -> KafkaError? {
        guard let error = rd_kafka_incremental_unassign(handle.pointer, list) else { return nil }
        return KafkaError(.rebalance, context, consuming: error)
    }

    /// EAGER: makes this rebalance's partitions the whole assignment.
    func assign(_ context: String) -> KafkaError? {
        let response = rd_kafka_assign(handle.pointer, list)
        guard response != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(.rebalance, context, response: response)
    }

    /// EAGER: drops the whole assignment.
    func unassignAll(_ context: String) -> KafkaError? {
        let response = rd_kafka_assign(handle.pointer, nil)
        guard response != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(.rebalance, context, response: response)
    }
}
