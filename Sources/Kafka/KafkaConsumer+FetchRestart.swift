// librdkafka before 2.2 decides whether to fetch a partition when its broker's thread wakes. If the
// prefetch queue is over `queued.max.messages.kbytes` at that moment, the partition stops fetching
// and nothing looks again until that thread next wakes: on I/O, or after up to a second. A reader
// that drains the queue faster than that then waits out the rest of the second with nothing to read,
// once per queueful, through every backlog: the backlog's drain rate fell to the queue's size per
// second (docs/performance.md, "A backlog stalled once a second"). librdkafka 2.2 made the wait a
// property (`fetch.queue.backoff.ms`, which the consumer sets); before it, the poll thread restarts
// such a partition itself: a seek to where the reader stands, which wakes the broker's thread and
// fetches from there. Nothing is skipped or read twice, since the seek goes to the next record the
// reader would get and waits until the fetcher has taken it.
//
// A seek is an op with a version barrier, and librdkafka drops any older op of the partition that has not
// run yet (confluentinc/librdkafka#2190): a seek landing between an assignment's FETCH_START and its run
// would leave the partition stopped for good, and one landing after a resume that has not run yet would
// leave it paused for good. So only a partition that has handed over a record since the last assignment,
// pause or resume (its fetcher has taken them) is ever restarted.

/// Finds partitions librdkafka left idle with records to read and restarts their fetching (poll thread).
struct StalledFetchRestarter {
    /// Whether the loaded librdkafka needs it: 2.2 and later retry on their own.
    static let isNeeded = !RDKafkaVersion.loaded.hasFetchQueueBackoff
    /// How long a restarted partition that has not moved since is left alone: a fetch slower than one
    /// empty poll then costs at most one repeated fetch per cool-down, never a restart loop. A partition
    /// that moved since its last restart may be restarted at once (a queueful drains in well under a
    /// second at full rate).
    static let coolDown: Duration = .seconds(1)
    /// How long a restart waits for the fetcher to take the new position.
    static let seekTimeoutMilliseconds: Int32 = 500

    /// While records flow, an empty queue is noticed after this long instead of the poll loop's usual
    /// 100 ms: each queueful drains in a fraction of a second at full rate, and every empty poll is
    /// time the pipeline waits.
    static let busyPollTimeoutMilliseconds: Int32 = 10
    /// How long after the last record the consumer still counts as busy.
    static let busyFor: Duration = .seconds(1)

    private var lastRecordAt: ContinuousClock.Instant?
    /// Partitions that handed over a record since the last assignment, pause or resume.
    private var started: Set<KafkaTopicPartition> = []
    private var lastPartition: KafkaTopicPartition?
    private var stateChangesSeen: UInt64 = 0

    /// Each restarted partition's last restart: when, and the position it restarted from.
    private var restarts: [KafkaTopicPartition: (at: ContinuousClock.Instant, position: Int64)] = [:]

    /// How long the next poll may wait: briefly while records flow, the poll loop's usual wait when idle.
    var pollTimeoutMilliseconds: Int32 {
        guard let lastRecordAt, ContinuousClock.now - lastRecordAt < Self.busyFor else {
            return KafkaConsumer.pollTimeoutMilliseconds
        }
        return Self.busyPollTimeoutMilliseconds
    }

    /// Called for each record the poll returns.
    mutating func recordArrived(from partition: KafkaTopicPartition) {
        lastRecordAt = .now
        if partition != lastPartition {
            started.insert(partition)
            lastPartition = partition
        }
    }

    /// Called before each check with a count that moves with every assignment, pause and resume: a change
    /// forgets which partitions had started.
    private mutating func noteStateChanges(_ count: UInt64) {
        guard count != stateChangesSeen else { return }
        stateChangesSeen = count
        started.removeAll()
        lastPartition = nil
    }

    /// After a poll came back with nothing: the queue is empty, so an unpaused partition whose broker
    /// reported records beyond the reader's position is not being fetched. Returns the partitions
    /// restarted.
    mutating func pollCameBackEmpty(
        client: RDKafkaClient, paused: Set<KafkaTopicPartition>, stateChanges: UInt64
    ) -> Int {
        noteStateChanges(stateChanges)
        guard !started.isEmpty else { return 0 }
        guard let assignment = try? client.assignment(withPositions: true), !assignment.isEmpty else { return 0 }
        let now = ContinuousClock.now
        var stalled: [(KafkaTopicPartition, Int64)] = []
        for entry in assignment where entry.offset >= 0 && !paused.contains(entry.topicPartition) {
            let partition = entry.topicPartition
            guard started.contains(partition) else { continue }
            guard let high = client.cachedHighWatermark(of: partition), high > entry.offset else { continue }
            if let last = restarts[partition], last.position == entry.offset, now - last.at < Self.coolDown { continue }
            stalled.append((partition, entry.offset))
        }
        guard !stalled.isEmpty else { return 0 }
        let restarted = Set(client.seek(stalled, timeoutMilliseconds: Self.seekTimeoutMilliseconds))
        for (partition, position) in stalled where restarted.contains(partition) {
            restarts[partition] = (now, position)
        }
        return restarted.count
    }
}
