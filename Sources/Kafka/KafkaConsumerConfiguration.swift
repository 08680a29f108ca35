// Settings of a group consumer, with the defaults the at-least-once design needs.

/// Settings of a ``KafkaConsumer``.
///
/// The defaults follow the design's delivery guarantee: librdkafka commits in the background
/// (`enable.auto.commit=true`) but only offsets the application stored explicitly
/// (`enable.auto.offset.store=false`), so nothing is committed before it is finished.
public struct KafkaConsumerConfiguration: Sendable {
    /// Where to start when a partition has no committed offset (`auto.offset.reset`).
    public enum OffsetReset: String, Sendable {
        case earliest, latest
        /// Fail with an error event instead of choosing.
        case error
    }

    /// How partitions are spread over a group's members (`partition.assignment.strategy`).
    public struct AssignmentStrategy: Hashable, Sendable {
        /// librdkafka's name of the strategy.
        public var name: String
        public init(name: String) { self.name = name }
        /// Incremental (COOPERATIVE) rebalancing: only moved partitions are revoked.
        public static let cooperativeSticky = AssignmentStrategy(name: "cooperative-sticky")
        /// EAGER rebalancing: every member gives up all partitions, then gets a new set.
        public static let range = AssignmentStrategy(name: "range")
        /// EAGER rebalancing, partitions dealt round-robin.
        public static let roundRobin = AssignmentStrategy(name: "roundrobin")
    }

    /// Brokers, client id and pass-through properties.
    public var client: KafkaConfiguration
    /// The consumer group (`group.id`). Required.
    public var groupID: String
    /// Default: `.earliest`.
    public var autoOffsetReset: OffsetReset = .earliest
    /// Default: `.cooperativeSticky`.
    public var assignmentStrategy: AssignmentStrategy = .cooperativeSticky
    /// Commit stored offsets in the background (`enable.auto.commit`). Default: `true`.
    public var enableAutoCommit: Bool = true
    /// How often background commits run (`auto.commit.interval.ms`). Default: 5 seconds.
    ///
    /// librdkafka's timer keeps its own schedule (skipping ticks while the group is not steady), while a
    /// restarted consumer may work through a backlog at several times the input rate: on its own it can
    /// leave seconds of that work uncommitted. See ``commitInterval``.
    public var autoCommitInterval: Duration = .seconds(5)
    /// How often the consumer itself commits the stored offsets when some were stored since its last
    /// commit (asynchronous, from a thread of its own), whatever state the group is in.
    /// A failed commit is reported like a failed auto-commit (``KafkaEvent/error(_:)``, code
    /// ``KafkaError/Code/commit``) and the next one carries its offsets. `nil`: only
    /// ``autoCommitInterval``. Default: `nil`.
    public var commitInterval: Duration?
    /// With ``commitInterval``: commit at once, without waiting for the interval, when the stored offsets
    /// advanced by this many records since the last commit. What a crash leaves uncommitted is then the
    /// unfinished records plus at most this many finished ones (and what finishes during a commit's round
    /// trip), at any rate. `nil`: the interval alone. Default: `nil`.
    public var commitAfterRecords: Int?
    /// How long the group waits for a silent member before rebalancing (`session.timeout.ms`).
    /// Default: 45 seconds.
    public var sessionTimeout: Duration = .seconds(45)
    /// How often the member heartbeats (`heartbeat.interval.ms`). Default: 3 seconds.
    public var heartbeatInterval: Duration = .seconds(3)
    /// How often librdkafka emits statistics JSON as ``KafkaEvent/statistics(_:)``
    /// (`statistics.interval.ms`). Default: `nil` (off).
    public var statisticsInterval: Duration?
    /// How many received records the hand-off between the poll thread and ``KafkaConsumer/messages``
    /// holds. When it is full the poll thread waits for room (see ``KafkaConsumer``). Default: 256.
    public var bufferCapacity: Int = 256
    /// How long the poll thread waits for room in a full hand-off before it pauses the assigned
    /// partitions so that it can go on polling (serving rebalances). Default: 1 second.
    public var stallTimeout: Duration = .seconds(1)
    /// How often the consumer reads librdkafka's statistics to learn which broker connections are up
    /// (see ``KafkaConsumerStatus``). librdkafka's `statistics.interval.ms` is the shorter of this and
    /// ``statisticsInterval``; statistics events reach the event handler only when ``statisticsInterval``
    /// is set. Default: 1 second.
    public var connectionCheckInterval: Duration = .seconds(1)
    /// How long a rebalance handler may take for revoked (or assigned) partitions before the consumer
    /// commits what is stored and releases them anyway. Default: 10 seconds.
    public var rebalanceDeadline: Duration = .seconds(10)
    /// How long a partition waits before fetching again after librdkafka found its prefetch queue full
    /// (`fetch.queue.backoff.ms`, librdkafka 2.2 and later). librdkafka's default, one second, outlasts
    /// the queue: a reader faster than one queue a second drained it and then waited for the rest of
    /// the second with nothing to read, through every backlog (docs/performance.md, "A backlog stalled
    /// once a second"). Retrying costs a look at the queue's size. Ignored by librdkafka before 2.2,
    /// which waits up to the second regardless. Default: 50 ms.
    public var fetchQueueBackoff: Duration = .milliseconds(50)
    /// How long an assigned, unpaused partition's position may stand still while the brokers hold records
    /// beyond it before the consumer counts it as stranded (librdkafka stopped fetching it), says so in
    /// ``KafkaConsumerStatus/strandedPartitions`` and restarts its fetching. Positions are read a few times
    /// per threshold; the brokers are asked for latest offsets only for partitions idle that long. `nil`
    /// turns the watch off. Default: 60 seconds.
    public var strandedPartitionThreshold: Duration? = .seconds(60)

    public init(client: KafkaConfiguration, groupID: String) {
        self.client = client
        self.groupID = groupID
    }

    /// The full librdkafka property list, in the order it is applied (later wins).
    func librdkafkaProperties() -> [(String, String)] {
        var own: [(String, String)] = [
            ("group.id", groupID),
            ("enable.auto.commit", enableAutoCommit ? "true" : "false"),
            ("enable.auto.offset.store", "false"),
            ("auto.offset.reset", autoOffsetReset.rawValue),
            ("partition.assignment.strategy", assignmentStrategy.name),
            ("auto.commit.interval.ms", String(autoCommitInterval.wholeMilliseconds)),
            ("session.timeout.ms", String(sessionTimeout.wholeMilliseconds)),
            ("heartbeat.interval.ms", String(heartbeatInterval.wholeMilliseconds)),
        ]
        let statistics = min(statisticsInterval ?? connectionCheckInterval, connectionCheckInterval)
        own.append(("statistics.interval.ms", String(max(1, statistics.wholeMilliseconds))))
        if RDKafkaVersion.loaded.hasFetchQueueBackoff {
            own.append(("fetch.queue.backoff.ms", String(fetchQueueBackoff.wholeMilliseconds)))
        }
        return client.librdkafkaProperties(with: own)
    }
}
