// Errors from librdkafka and from this module's own checks. Each carries a code to compare on,
// a message that says what went wrong and where, and librdkafka's own error name when it came from there.

/// An error from the Kafka module.
///
/// Compare errors by ``code``: `error.code == .queueFull`. The ``message`` is for people; it never
/// contains the value of a secret-looking configuration property.
public struct KafkaError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case invalidConfiguration, subscription, rebalance, partitionState
            case offsetStore, commit, produce, queueFull, delivery, messageTooLarge, fatal, timeout, closed
            case query, mockCluster, client
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A configuration property was rejected, or librdkafka refused to create a client from the
        /// properties (an impossible combination, an unreadable key or certificate, ...).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// Subscribing to topics failed.
        public static let subscription = Code(.subscription)
        /// Applying a rebalance (assign / unassign) failed.
        public static let rebalance = Code(.rebalance)
        /// Pausing or resuming partitions failed (usually: the partition is not assigned).
        public static let partitionState = Code(.partitionState)
        /// Storing an offset failed (usually: the partition is not assigned to this consumer any more).
        public static let offsetStore = Code(.offsetStore)
        /// Committing offsets failed.
        public static let commit = Code(.commit)
        /// librdkafka refused to enqueue a message (other than a full queue).
        public static let produce = Code(.produce)
        /// The producer's local queue stayed full for longer than the enqueue timeout.
        public static let queueFull = Code(.queueFull)
        /// A message was enqueued but could not be delivered (its delivery report carries the error).
        public static let delivery = Code(.delivery)
        /// A record is larger than the producer or the broker accepts (librdkafka's `MSG_SIZE_TOO_LARGE`: the
        /// producer's `message.max.bytes` at enqueue, or the broker's `message.max.bytes` or the topic's
        /// `max.message.bytes` in the delivery report). Sending the same record again cannot succeed.
        public static let messageTooLarge = Code(.messageTooLarge)
        /// The client hit a fatal error (for example an idempotence guarantee could not be kept);
        /// it cannot be used any more and must be recreated.
        public static let fatal = Code(.fatal)
        /// An operation did not finish within its timeout.
        public static let timeout = Code(.timeout)
        /// The client was closed.
        public static let closed = Code(.closed)
        /// A query to the cluster (committed offsets, watermarks) failed.
        public static let query = Code(.query)
        /// The mock cluster could not be started or changed.
        public static let mockCluster = Code(.mockCluster)
        /// An error librdkafka reported on its own (broker down, topic unknown, ...); librdkafka
        /// retries these itself, so they are informational.
        public static let client = Code(.client)

        public var description: String { value.rawValue }
    }

    /// What kind of failure this is; compare errors with it.
    public var code: Code
    /// What went wrong and where, for people.
    public var message: String
    /// librdkafka's numeric error (its response code), when librdkafka reported the error.
    public var librdkafkaCode: Int32?
    /// librdkafka's name for ``librdkafkaCode``, for example `_QUEUE_FULL` or `UNKNOWN_TOPIC_OR_PART`.
    public var librdkafkaName: String?

    public init(code: Code, message: String, librdkafkaCode: Int32? = nil, librdkafkaName: String? = nil) {
        self.code = code
        self.message = message
        self.librdkafkaCode = librdkafkaCode
        self.librdkafkaName = librdkafkaName
    }

    public var description: String {
        if let librdkafkaName { return "\(message) [\(code), librdkafka \(librdkafkaName)]" }
        return "\(message) [\(code)]"
    }

    /// Errors are equal when their codes are.
    public static func == (lhs: KafkaError, rhs: KafkaError) -> Bool { lhs.code == rhs.code }
}

extension KafkaError {
    /// Whether a producer's failure passes with time (a broker outage) or not (it would fail again).
    public enum ProducerFailureKind: Sendable, Equatable {
        /// The brokers were away or busy: sending the same record again later succeeds.
        case transient
        /// Sending the same record again fails the same way; the producer's user must stop.
        case permanent
    }

    /// How a failure of ``KafkaProducer/send(topic:key:value:headers:partition:onDelivery:)`` or of a delivery
    /// report should be treated: wait and send again, or stop.
    ///
    /// The classification, by librdkafka's error code (librdkafka already retries every retriable
    /// broker error of a produce request itself; what reaches a delivery report has passed its retries):
    /// - transient: the record could not be sent in time while brokers were away or busy: `_MSG_TIMED_OUT`
    ///   (`message.timeout.ms` passed), `_TIMED_OUT`, `_TIMED_OUT_QUEUE`, `_TRANSPORT`, `_ALL_BROKERS_DOWN`,
    ///   `_RESOLVE`, `_QUEUE_FULL`, `_WAIT_COORD`, `_RETRY`, and the broker's retriable errors
    ///   `REQUEST_TIMED_OUT`, `NETWORK_EXCEPTION`, `LEADER_NOT_AVAILABLE`, `NOT_LEADER_FOR_PARTITION`,
    ///   `BROKER_NOT_AVAILABLE`, `REPLICA_NOT_AVAILABLE`, `NOT_ENOUGH_REPLICAS(_AFTER_APPEND)`,
    ///   `KAFKA_STORAGE_ERROR`, `NOT_CONTROLLER`, `COORDINATOR_*`, `NOT_COORDINATOR`, `FENCED_LEADER_EPOCH`,
    ///   `UNKNOWN_LEADER_EPOCH`, `PREFERRED_LEADER_NOT_AVAILABLE`, `THROTTLING_QUOTA_EXCEEDED`; and this
    ///   module's own ``Code/queueFull``.
    /// - permanent: everything else, notably authorization (`TOPIC_AUTHORIZATION_FAILED`,
    ///   `CLUSTER_AUTHORIZATION_FAILED`), a topic or partition that does not exist (`_UNKNOWN_TOPIC`,
    ///   `UNKNOWN_TOPIC_OR_PART`, `_UNKNOWN_PARTITION`: librdkafka reports them only once the metadata
    ///   says so), a record the broker refuses (`MSG_SIZE_TOO_LARGE`, `INVALID_RECORD`, `POLICY_VIOLATION`),
    ///   a broken idempotence guarantee (`_FATAL`, `OUT_OF_ORDER_SEQUENCE_NUMBER`, `INVALID_PRODUCER_EPOCH`,
    ///   `_INCONSISTENT`), records purged by a closing producer (`_PURGE_QUEUE`, `_PURGE_INFLIGHT`), and
    ///   this module's ``Code/closed``, ``Code/fatal`` and ``Code/messageTooLarge``. Codes librdkafka adds
    ///   later are permanent too: a stop that names its cause is safer than a loop that hides one.
    public var producerFailureKind: ProducerFailureKind {
        if code == .queueFull { return .transient }
        guard code == .delivery || code == .produce, let librdkafkaCode else { return .permanent }
        return RDKafkaResponse.transientProducerCodes.contains(librdkafkaCode) ? .transient : .permanent
    }
}
