// What a consumer knows of its cluster and its group, for readiness probes, logs and metrics: whether
// any broker answers (from librdkafka's error events and statistics) and whether it holds group
// membership (from its rebalances).

/// A consumer's view of the brokers and of its group membership.
///
/// librdkafka retries connections and rejoins on its own, so none of this is an error; it says
/// whether the consumer can work right now. See ``KafkaConsumer/status``.
public struct KafkaConsumerStatus: Sendable, Equatable, CustomStringConvertible {
    /// Brokers whose connection is up (librdkafka state `UP`), as of the last check.
    public var brokersUp: Int
    /// Brokers the client knows: those of `bootstrap.servers` and those learned from metadata.
    public var brokersKnown: Int
    /// Whether some broker answers. False until the first connection is up.
    public var brokersReachable: Bool
    /// Why no broker answers (librdkafka's last connection error), while none does.
    public var brokersCause: String?
    /// Whether the consumer is a member of its group: it was given an assignment (possibly empty) and
    /// has not lost it since. False before the first assignment and after the group moved on without it.
    public var isGroupMember: Bool
    /// Why the consumer is not a member, while it is not.
    public var membershipCause: String?
    /// Partitions currently assigned to this consumer.
    public var partitionsAssigned: Int
    /// Assigned partitions, not paused, whose position has not moved for
    /// ``KafkaConsumerConfiguration/strandedPartitionThreshold`` while the brokers hold records beyond it:
    /// librdkafka stopped fetching them. The consumer restarts their fetching; a partition leaves this list
    /// when it moves or is revoked. Sorted.
    public var strandedPartitions: [KafkaTopicPartition] = []

    /// The status of a consumer just created: nothing connected, not joined.
    public static let initial = KafkaConsumerStatus(
        brokersUp: 0, brokersKnown: 0, brokersReachable: false, brokersCause: "not connected yet",
        isGroupMember: false, membershipCause: "not joined yet", partitionsAssigned: 0)

    public var description: String {
        var parts = ["brokers \(brokersUp)/\(brokersKnown) up"]
        if !brokersReachable { parts.append("unreachable: \(brokersCause ?? "unknown")") }
        parts.append(isGroupMember ? "group member" : "not a group member: \(membershipCause ?? "unknown")")
        parts.append("\(partitionsAssigned) partitions assigned")
        if !strandedPartitions.isEmpty {
            parts.append("not fetching: " + strandedPartitions.map(\.description).joined(separator: ", "))
        }
        return parts.joined(separator: "; ")
    }
}

/// A change of a consumer's ``KafkaConsumerStatus``: what it was and what it is now.
public struct KafkaConsumerStatusChange: Sendable {
    public var previous: KafkaConsumerStatus
    public var current: KafkaConsumerStatus

    public init(previous: KafkaConsumerStatus, current: KafkaConsumerStatus) {
        self.previous = previous
        self.current = current
    }

    /// Whether brokers became unreachable or reachable again with this change.
    public var brokersReachabilityChanged: Bool { previous.brokersReachable != current.brokersReachable }
    /// Whether the consumer joined its group or lost its membership with this change.
    public var membershipChanged: Bool { previous.isGroupMember != current.isGroupMember }
    /// Whether partitions were found stranded, or stranded ones moved again, with this change.
    public var strandedPartitionsChanged: Bool { previous.strandedPartitions != current.strandedPartitions }
}

/// Receives a consumer's status changes, on its poll thread. It must return quickly.
public typealias KafkaConsumerStatusHandler = @Sendable (KafkaConsumerStatusChange) -> Void

/// The broker connection states in librdkafka's statistics JSON (STATISTICS.md: `brokers.*.state`).
enum BrokerStatistics {
    /// Counts the real brokers (source `configured` or `learned`; not the internal or logical ones)
    /// and those whose state is `UP` (or `UPDATE`, a connected broker refreshing its API versions).
    /// Nil when the JSON has no `brokers` object.
    ///
    /// A scan rather than a parse: librdkafka writes the object itself, each broker with `source`
    /// before `state`, and no other key named `source` comes before `topics`.
    static func counts(in json: String) -> (up: Int, known: Int)? {
        var text = Substring(json)
        guard let brokers = text.range(of: "\"brokers\":") else { return nil }
        text = text[brokers.upperBound...]
        if let topics = text.range(of: "\"topics\":") { text = text[..<topics.lowerBound] }
        var up = 0
        var known = 0
        while let source = value(of: "source", in: &text) {
            guard let state = value(of: "state", in: &text) else { break }
            guard source == "configured" || source == "learned" else { continue }
            known += 1
            if state == "UP" || state == "UPDATE" { up += 1 }
        }
        return (up, known)
    }

    /// The string value of the next `"key": "value"` in `text`, which then starts after it.
    private static func value(of key: String, in text: inout Substring) -> Substring? {
        guard let keyRange = text.range(of: "\"\(key)\"") else { return nil }
        var rest = text[keyRange.upperBound...].drop { $0 == " " }
        guard rest.first == ":" else {
            text = rest
            return value(of: key, in: &text)
        }
        rest = rest.dropFirst().drop { $0 == " " }
        guard rest.first == "\"", let end = rest.dropFirst().firstIndex(of: "\"") else { return nil }
        let found = rest[rest.index(after: rest.startIndex)..<end]
        text = rest[rest.index(after: end)...]
        return found
    }
}
