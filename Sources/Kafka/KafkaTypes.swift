// The values that cross the module boundary: partitions, headers, messages, delivery reports,
// rebalance and client events. None of them holds a C pointer.

/// One partition of one topic.
public struct KafkaTopicPartition: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }

    public static func < (lhs: KafkaTopicPartition, rhs: KafkaTopicPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// A record header. Kafka allows several headers with one name, and a header without a value.
public struct KafkaHeader: Hashable, Sendable {
    public var name: String
    public var value: [UInt8]?

    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }

    public init(name: String, string: String) {
        self.init(name: name, value: Array(string.utf8))
    }
}

/// A record's timestamp: milliseconds since 1970-01-01T00:00:00Z, and who set it.
public struct KafkaTimestamp: Hashable, Sendable {
    public enum Kind: Sendable {
        /// Set by the producer.
        case createTime
        /// Set by the broker when it appended the record.
        case logAppendTime
    }
    public var millisecondsSince1970: Int64
    public var kind: Kind

    public init(millisecondsSince1970: Int64, kind: Kind) {
        self.millisecondsSince1970 = millisecondsSince1970
        self.kind = kind
    }
}

/// A record received by a ``KafkaConsumer``.
public struct KafkaConsumerMessage: Sendable {
    public var topic: String
    public var partition: Int32
    /// The record's offset in its partition. To mark it finished, store `offset + 1`
    /// (see ``KafkaConsumer/storeOffset(topic:partition:nextOffset:)``).
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]
    public var timestamp: KafkaTimestamp?
    /// Which assignment of its partition to this consumer the record was received under (a number the
    /// consumer gives each assignment; 0 in a test double's records). A record taken from ``KafkaConsumer/messages``
    /// just before its partition was revoked may reach its reader after that, even after the partition
    /// came back (an eager rebalance hands a member its partitions straight back), which then reads it
    /// again from the committed offset: ``KafkaConsumer/isCurrent(_:assignment:)`` tells the two apart.
    public var assignment: UInt64 = 0

    public var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }

    /// For test doubles of a record source; the consumer makes these from what it receives.
    public init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
        headers: [KafkaHeader] = [], timestamp: KafkaTimestamp? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
    }
}

/// Where a produced record landed.
public struct KafkaDeliveryReport: Hashable, Sendable {
    public var topic: String
    public var partition: Int32
    /// The record's offset, or `nil` when librdkafka does not know it (this can happen for
    /// records that were retried by the idempotent producer; the record is still stored once).
    public var offset: Int64?

    public init(topic: String, partition: Int32, offset: Int64?) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// A record librdkafka could not deliver, copied from its delivery report: what a sender that keeps no copy
/// of its own needs to send it again, or to say what it was (see ``KafkaDelivery/failed(_:record:)``).
public struct KafkaUndeliveredRecord: Sendable {
    public var topic: String
    /// The partition it went to, or -1 when librdkafka had not chosen one.
    public var partition: Int32
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]

    public init(topic: String, partition: Int32, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// How far a consumer is behind in one partition, from librdkafka's local view (no broker call).
public struct KafkaPartitionLag: Hashable, Sendable {
    public var topicPartition: KafkaTopicPartition
    /// The next offset this consumer will hand out, or `nil` before it has received anything.
    public var position: Int64?
    /// The partition's high watermark (offset of the next record to be written) as of the last
    /// fetch response, or `nil` before the first fetch. It is stale for paused partitions.
    public var highWatermark: Int64?
    /// `highWatermark - position` when both are known.
    public var lag: Int64? {
        guard let position, let highWatermark else { return nil }
        return max(0, highWatermark - position)
    }
}

/// A change in a consumer's partitions, given to its rebalance handler.
public enum KafkaRebalanceEvent: Sendable {
    /// These partitions now belong to this consumer; records of them follow.
    case assigned([KafkaTopicPartition])
    /// These partitions are being taken away. See ``KafkaRevocation``.
    case revoked(KafkaRevocation)
}

/// Partitions being taken away from a consumer, and how long it has to hand them over.
///
/// Before the handler runs, the consumer drops records of these partitions that it had received
/// but not yet handed out. The handler should finish or abandon in-flight work of these
/// partitions by ``deadline`` and store offsets for what finished; afterwards the consumer commits
/// the stored offsets synchronously (with the cooperative protocol retrying while the group completes
/// the round, until the deadline and for at least a second) and releases the partitions. Abandoned
/// records, and finished ones whose commit failed (reported as a ``KafkaError/Code/commit`` error
/// event), are redelivered to the next owner: at-least-once.
public struct KafkaRevocation: Sendable {
    public var partitions: [KafkaTopicPartition]
    /// When the consumer stops waiting for the handler and releases the partitions.
    public var deadline: ContinuousClock.Instant
    /// The partitions were lost (the group moved on without this member, e.g. after a session
    /// timeout): they may already belong to someone else, so storing or committing for them fails.
    public var isLost: Bool
}

/// A log line from librdkafka.
public struct KafkaLogMessage: Sendable {
    /// syslog severity: 0 emergency ... 3 error, 4 warning, 5 notice, 6 info, 7 debug.
    public var level: Int32
    /// librdkafka's facility, for example `FAIL`, `REQTMOUT`, `CGRPJOINSTATE`.
    public var facility: String
    public var message: String
}

/// Something a client reports besides its records: the module never logs on its own, it hands
/// these to the owner's event handler.
public enum KafkaEvent: Sendable {
    /// A log line from librdkafka. Delivered on librdkafka's internal threads.
    case log(KafkaLogMessage)
    /// An error librdkafka reports and usually recovers from on its own (broker down, topic
    /// unknown, commit failed). Delivered on the client's poll thread, except failed background
    /// commits, which come from librdkafka's main thread.
    case error(KafkaError)
    /// A fatal error: the client stops working and must be recreated. Delivered on the poll thread.
    case fatal(KafkaError)
    /// librdkafka's statistics JSON (see STATISTICS.md), every `statisticsInterval`.
    case statistics(String)
}

/// Receives a client's ``KafkaEvent``s. It must return quickly and must not call back into
/// the client's blocking operations.
public typealias KafkaEventHandler = @Sendable (KafkaEvent) -> Void
