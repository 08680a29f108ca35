// Errors from librdkafka and from this module's own checks. Each carries a code to compare on,
// a message that says what went wrong and where, and librdkafka's own error name when it came from there.
internal import CRdKafka

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
    /// librdkafka's numeric error (`rd_kafka_resp_err_t`), when librdkafka reported the error.
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
    /// An error for a librdkafka response code: "`context`: librdkafka's text".
    init(_ code: Code, _ context: String, response: rd_kafka_resp_err_t) {
        let text = String(cString: rd_kafka_err2str(response))
        self.init(
            code: code, message: "\(context): \(text)",
            librdkafkaCode: response.rawValue, librdkafkaName: String(cString: rd_kafka_err2name(response))
        )
    }

    /// Takes over and destroys an `rd_kafka_error_t`.
    init(_ code: Code, _ context: String, consuming error: OpaquePointer) {
        defer { rd_kafka_error_destroy(error) }
        let response = rd_kafka_error_code(error)
        self.init(
            code: code, message: "\(context): \(String(cString: rd_kafka_error_string(error)))",
            librdkafkaCode: response.rawValue, librdkafkaName: String(cString: rd_kafka_err2name(response))
        )
    }
}
