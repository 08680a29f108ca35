// The transactional producer's librdkafka calls (init, begin, send offsets, commit, abort) and the
// consumer's group metadata that ties offsets sent in a transaction to the group's current generation.
// Every call here but `beginTransaction` blocks: callers run them on a thread of their own.

internal import CRdKafka

/// A consumer's group metadata (group, generation, member id, instance id) at the moment it was taken:
/// offsets sent in a transaction with it are refused once the generation moved on, which is what fences a
/// zombie that lost its partitions (KIP-447).
public final class KafkaGroupMetadata: @unchecked Sendable {
    // Immutable after creation; librdkafka only reads it.
    let pointer: OpaquePointer

    init(pointer: OpaquePointer) { self.pointer = pointer }

    deinit { rd_kafka_consumer_group_metadata_destroy(pointer) }
}

/// Why a transaction call failed, classified as librdkafka documents it for transactional producers.
public struct KafkaTransactionError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The producer cannot go on (fenced by a newer instance, an unrecoverable broker answer): stop.
        case fatal
        /// The transaction must be aborted; the producer may then begin a new one.
        case abortable
        /// The same call may be made again (it timed out, the coordinator moved).
        case retriable
        /// Anything else (a call out of order): treated like an abortable error by callers that must go on.
        case other
    }

    public var kind: Kind
    public var error: KafkaError

    public init(kind: Kind, error: KafkaError) {
        self.kind = kind
        self.error = error
    }

    public var description: String { error.description }
}

extension RDKafkaClient {
    func groupMetadata() -> KafkaGroupMetadata? {
        rd_kafka_consumer_group_metadata(handle).map(KafkaGroupMetadata.init(pointer:))
    }

    func initTransactions(milliseconds: Int32) -> KafkaTransactionError? {
        Self.transactionError("initialising transactions", rd_kafka_init_transactions(handle, milliseconds))
    }

    func beginTransaction() -> KafkaTransactionError? {
        Self.transactionError("beginning a transaction", rd_kafka_begin_transaction(handle))
    }

    func sendOffsetsToTransaction(
        _ nextOffsets: [KafkaTopicPartition: Int64], group: KafkaGroupMetadata, milliseconds: Int32
    ) -> KafkaTransactionError? {
        let list = RDKafkaTopicPartitionList(offsets: nextOffsets.map { ($0.key, $0.value) })
        return withExtendedLifetime(group) {
            Self.transactionError(
                "sending offsets to the transaction",
                rd_kafka_send_offsets_to_transaction(handle, list.pointer, group.pointer, milliseconds))
        }
    }

    func commitTransaction(milliseconds: Int32) -> KafkaTransactionError? {
        Self.transactionError("committing the transaction", rd_kafka_commit_transaction(handle, milliseconds))
    }

    func abortTransaction(milliseconds: Int32) -> KafkaTransactionError? {
        Self.transactionError("aborting the transaction", rd_kafka_abort_transaction(handle, milliseconds))
    }

    /// Answers that mean a newer instance took over: whatever librdkafka's flags say (it reports a fence seen
    /// in a TxnOffsetCommit answer as abortable, and the abort that follows then never completes on some
    /// brokers), this producer must stop.
    static let fencingCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR__FENCED, RD_KAFKA_RESP_ERR_PRODUCER_FENCED, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
            RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID, RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ].map(\.rawValue))

    /// Classifies and destroys an `rd_kafka_error_t`; nil for none.
    private static func transactionError(_ context: String, _ error: OpaquePointer?) -> KafkaTransactionError? {
        guard let error else { return nil }
        let kind: KafkaTransactionError.Kind =
            rd_kafka_error_is_fatal(error) != 0 || fencingCodes.contains(rd_kafka_error_code(error).rawValue)
            ? .fatal
            : rd_kafka_error_txn_requires_abort(error) != 0
                ? .abortable : rd_kafka_error_is_retriable(error) != 0 ? .retriable : .other
        let code: KafkaError.Code = kind == .fatal ? .fatal : .commit
        return KafkaTransactionError(kind: kind, error: KafkaError(code, context, consuming: error))
    }
}
