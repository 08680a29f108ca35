// A partition librdkafka stopped fetching on its own is work silently not done: it stays assigned, its
// records wait in Kafka, and nothing errs. librdkafka's pause, resume, seek and fetch start are ops with
// version barriers that drop any older op of the partition not yet run (confluentinc/librdkafka#2190,
// #5591: a pause-assign-resume sequence that left a partition paused for good, in production). The
// consumer orders its own pauses so that none should race (KafkaConsumerCore+Pause.swift); this watch
// is what catches one that does anyway, or any other way a partition stops: it finds assigned
// partitions, not paused by the consumer, whose position has not moved for `threshold` while the
// brokers hold records beyond it, says so in the consumer's status (the worker logs it, and /readyz and
// /metrics show it), and restarts their fetching (a resume, and a seek to where the reader stands).
//
// The watch runs on a thread of its own (`kafka-stranded`): its looks at the brokers block for up to their
// timeout, and on the poll thread they held up rebalance callbacks (a storm test saw a revoke handler start
// after its deadline had passed). What it finds reaches the status through the poll thread, which applies
// every status change, so that the status handler hears changes in order. The restart runs there too, after
// a second look at the positions: the poll thread hands over every record, so none moves a partition between
// that look and the restart. The watch's own look can be seconds old by then (its broker queries block): when
// the restart ran on the watch's thread, a partition that started fetching meanwhile was taken back by the
// restart's seek, and CI saw two of its records read twice.
//
// Progress is read from librdkafka's positions at each check (no cost per record); the brokers are
// asked for the partitions' latest offsets only for partitions idle that long, one ListOffsets request
// per leader, at most once per `threshold` for each. A partition counts as stranded only when two such
// looks, a threshold apart, both found records beyond the same position: records that arrived just
// before a look, which the fetcher is about to take, are not a stranded partition. Time the poll thread
// spends in a rebalance callback does not count: it hands over no record of any partition meanwhile (a
// revoke waits for the owner's handler, in the worker up to `revoke_timeout`), so the partitions kept
// through it stand still with records beyond them (a storm test saw two named stranded that way).

import Dispatch

/// Finds assigned, unpaused partitions that hold unread records and fetch none (on its own thread).
struct StrandedPartitionWatch {
    /// How long a partition's position must stand still, with records beyond it, to count as stranded.
    let threshold: Duration
    /// How often the positions are read.
    let checkInterval: Duration
    /// How long one broker query may block the watch's thread.
    static let queryTimeoutMilliseconds: Int32 = 2000

    /// Each assigned partition's position at the last check, since when it has stood there (or since its
    /// last look at the brokers, which then waits another `threshold`), and whether that look found records
    /// beyond it.
    private var idle: [KafkaTopicPartition: Idle] = [:]

    private struct Idle {
        var position: Int64
        var since: ContinuousClock.Instant
        var recordsBeyond = false
    }
    /// Partitions found stranded and not moved since.
    private(set) var stranded: Set<KafkaTopicPartition> = []
    /// `ConsumerCore.rebalanceCallbackEdges` at the last check.
    private var rebalanceEdgesSeen: UInt64 = 0

    init(threshold: Duration) {
        self.threshold = threshold
        checkInterval = min(max(threshold / 4, .milliseconds(100)), .seconds(15))
    }

    /// The watch's loop, on its own thread, until the consumer starts closing: a check every `checkInterval`,
    /// its finding (when it changed) and the partitions to restart handed to the poll thread
    /// (`ConsumerCore.offerStranded`).
    static func run(threshold: Duration, client: RDKafkaClient, core: ConsumerCore) {
        var watch = StrandedPartitionWatch(threshold: threshold)
        let milliseconds = Int(clamping: watch.checkInterval.wholeMilliseconds)
        while core.isRunning {
            _ = core.strandedWatchWake.wait(timeout: .now() + .milliseconds(milliseconds))
            guard core.isRunning else { return }
            let before = watch.stranded
            let found = watch.check(client: client, core: core, now: .now)
            // The status names a partition before its restart (the poll thread takes offers in order): once
            // restarted, its records can reach the consumer's reader before a finding offered after them.
            core.offerStranded(watch.stranded != before ? watch.stranded : nil, restarting: found)
        }
    }

    /// Updates what the watch knows from the positions (and, for partitions idle a threshold, the brokers'
    /// latest offsets), and returns the partitions found stranded now, with where each stands and should
    /// read from.
    mutating func check(
        client: RDKafkaClient, core: ConsumerCore, now: ContinuousClock.Instant
    ) -> [StrandedPartition] {
        core.strandedChecks.add(1, ordering: .relaxed)
        guard let assignment = try? client.assignment(withPositions: true) else { return [] }
        let (paused, _) = core.pausesAndChanges
        let assigned = core.assignedPartitions
        // In a rebalance callback now, or in one since the last check: every partition's wait starts again.
        let rebalanceEdges = core.rebalanceCallbackEdges.load(ordering: .acquiring)
        let pollThreadWasHeld = rebalanceEdges != rebalanceEdgesSeen || rebalanceEdges % 2 == 1
        rebalanceEdgesSeen = rebalanceEdges
        var seen: Set<KafkaTopicPartition> = []
        var candidates: [(partition: KafkaTopicPartition, position: Int64, assignment: UInt64)] = []
        for entry in assignment {
            let partition = entry.topicPartition
            seen.insert(partition)
            // No position, yet it handed over records since its assignment: librdkafka 2.16 can leave the
            // position unset after a resume of a partition that had not fetched. It is fetching; with no
            // position to watch, it is left alone until it has one.
            let unmeasurable = entry.offset < 0 && assigned[partition]?.hasFetched == true
            guard let last = idle[partition], last.position == entry.offset, !unmeasurable else {
                // New, or it moved: whatever stranded it is over.
                idle[partition] = Idle(position: entry.offset, since: now)
                stranded.remove(partition)
                continue
            }
            // A paused partition is meant not to fetch, and a rebalance callback holds up every partition's
            // records: the wait starts again when it is resumed, or the callback has returned.
            if paused.contains(partition) || pollThreadWasHeld {
                idle[partition] = Idle(position: entry.offset, since: now)
                continue
            }
            // One the consumer has not recorded yet is left for the next check.
            if now - last.since >= threshold, let assignment = assigned[partition]?.assignment {
                candidates.append((partition, entry.offset, assignment))
            }
        }
        for partition in idle.keys where !seen.contains(partition) { idle[partition] = nil }
        stranded.formIntersection(seen)
        // While no broker answers nothing can be fetched anyway, and the status already says why.
        guard !candidates.isEmpty, core.status.brokersReachable else { return [] }
        for candidate in candidates { idle[candidate.partition]?.since = now }

        let partitions = candidates.map(\.partition)
        let latest = client.listOffsets(
            partitions, at: RDKafkaClient.latestOffset, timeoutMilliseconds: Self.queryTimeoutMilliseconds)
        guard !latest.isEmpty else { return [] }
        // Where each would read from: its position, or for one that never fetched, its committed offset, or
        // the earliest record still kept (`auto.offset.reset` earliest; with `latest` there is nothing to miss).
        let unpositioned = candidates.filter { $0.position < 0 }.map(\.partition)
        let committed =
            (try? client.committedOffsets(
                for: unpositioned, timeout: .milliseconds(Int64(Self.queryTimeoutMilliseconds)))) ?? [:]
        let earliest = client.listOffsets(
            unpositioned.filter { committed[$0] == nil }, at: RDKafkaClient.earliestOffset,
            timeoutMilliseconds: Self.queryTimeoutMilliseconds)
        var found: [StrandedPartition] = []
        for (partition, position, assignment) in candidates {
            guard let end = latest[partition],
                let start = position >= 0 ? position : (committed[partition] ?? earliest[partition])
            else {
                idle[partition]?.recordsBeyond = false
                continue
            }
            let recordsBeyond = end > start
            if recordsBeyond, idle[partition]?.recordsBeyond == true {
                found.append(
                    StrandedPartition(partition: partition, assignment: assignment, position: position, readFrom: start)
                )
            }
            idle[partition]?.recordsBeyond = recordsBeyond
        }
        // A consumer that started closing meanwhile is left alone: its handle is closing.
        guard !found.isEmpty, core.isRunning else { return [] }
        stranded.formUnion(found.map(\.partition))
        return found
    }

    /// How long a restart's seek may hold up the poll thread (rebalance callbacks wait behind it).
    static let seekTimeoutMilliseconds: Int32 = 500

    /// Restarts fetching (poll thread): a resume (which lifts a pause librdkafka kept that the consumer did
    /// not ask for) and a seek to where the partition should read from (which wakes a fetcher that sits
    /// idle). A partition whose fetch was never started refuses the seek; it stays in the status until it
    /// moves. Only partitions still where the watch found them are restarted: one that moved since is not
    /// stranded, and the seek would take it back to records it has handed over. One without a position
    /// must also have handed over nothing since its assignment (librdkafka 2.16 can leave a fetching
    /// partition without one). One assigned again since is left too: its committed offset may have moved,
    /// and a seek landing before its new fetch start has run would leave it stopped (see KafkaConsumer+FetchRestart.swift).
    static func restart(_ found: [StrandedPartition], client: RDKafkaClient, core: ConsumerCore) {
        guard let assignment = try? client.assignment(withPositions: true) else { return }
        var positions: [KafkaTopicPartition: Int64] = [:]
        for entry in assignment { positions[entry.topicPartition] = entry.offset }
        let assigned = core.assignedPartitions
        let still = found.filter { stranded in
            guard let now = assigned[stranded.partition], now.assignment == stranded.assignment else { return false }
            return positions[stranded.partition] == stranded.position && (stranded.position >= 0 || !now.hasFetched)
        }
        guard !still.isEmpty else { return }
        // Counted first: the resume lets the partition's records through at once, and a reader can have
        // them before the seek (which waits for librdkafka) returns.
        core.strandedRestarts.add(still.count, ordering: .relaxed)
        core.resumeStranded(Set(still.map(\.partition)))
        _ = client.seek(still.map { ($0.partition, $0.readFrom) }, timeoutMilliseconds: Self.seekTimeoutMilliseconds)
    }
}

/// A partition the watch found stranded: the position it stood at (negative: none), and where it should read
/// from (that position, or for one without, its committed offset or the earliest record kept).
struct StrandedPartition: Sendable {
    let partition: KafkaTopicPartition
    /// The consumer's number of the assignment it was found in.
    let assignment: UInt64
    let position: Int64
    let readFrom: Int64
}
