// Pauses are kept in two sets: the owner's (its flow control) and the hand-off's (a full buffer), so
// that resuming one never resumes a partition the other still holds. librdkafka is told only about
// partitions that have fetched since their assignment, and every pause it holds is lifted before a
// partition is revoked, because librdkafka's pause, resume and fetch start are ops whose order it does
// not keep when they are issued from different threads at the same moment: each takes a version number
// and then queues itself, and an op found older than one already run is dropped
// (librdkafka's toppar op serve). A resume issued while librdkafka's main thread starts an assignment's
// fetching could drop that fetch start (the partition stays assigned and never fetches: statistics say
// `fetch_state: stopped`) or be dropped itself (it stays paused). A partition that has handed over a
// record has run its fetch start, and one being revoked is quiet until its unassign, which comes after.

extension ConsumerCore {
    func pauseByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "pause")
            state.pausedByOwner.formUnion(partitions)
            if let error = applyPauses(partitions, &state) { throw error }
        }
    }

    /// Pauses every partition held now, under one look at the assignment: a revoke between a read of the
    /// assignment and a pause of what it listed would make that pause refuse them all.
    func pauseAllByOwner() throws(KafkaError) -> Set<KafkaTopicPartition> {
        try state.withLock { state throws(KafkaError) in
            let partitions = state.assignment
            state.pausedByOwner.formUnion(partitions)
            if let error = applyPauses(partitions, &state) { throw error }
            return partitions
        }
    }

    func resumeByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "resume")
            state.pausedByOwner.subtract(partitions)
            // A partition the full hand-off also paused stays paused until the hand-off drains.
            if let error = applyPauses(partitions, &state) { throw error }
        }
    }

    /// Brings librdkafka's pauses of `partitions` in line with the owner's and the hand-off's: paused if
    /// either holds it, once it has fetched since its assignment. One that has not keeps its pause in these
    /// sets alone until its first record arrives (`deliver`, which holds that record back), or is revoked.
    /// A partition no longer held by either gets its held-back record handed out.
    @discardableResult
    func applyPauses(_ partitions: some Sequence<KafkaTopicPartition>, _ state: inout State) -> KafkaError? {
        var toPause: Set<KafkaTopicPartition> = []
        var toResume: Set<KafkaTopicPartition> = []
        var released: [KafkaConsumerMessage] = []
        for partition in partitions where state.assigned[partition]?.hasFetched == true {
            let wanted = state.isPaused(partition)
            let paused = state.pausedInLibrdkafka.contains(partition)
            if wanted, !paused { toPause.insert(partition) }
            if !wanted, paused { toResume.insert(partition) }
            if !wanted, let held = state.assigned[partition]?.heldFirstRecord {
                state.assigned[partition]?.heldFirstRecord = nil
                released.append(held)
            }
        }
        state.pausedInLibrdkafka.formUnion(toPause)
        state.pausedInLibrdkafka.subtract(toResume)
        let pauseError = setPaused(true, toPause, handle: state.handle)
        let resumeError = setPaused(false, toResume, handle: state.handle)
        // Before anything fetched after the resume: the held record comes first.
        for message in released { handOut(message, &state) }
        return pauseError ?? resumeError
    }

    /// Lifts librdkafka's pauses of `partitions`, whatever the owner's and the hand-off's sets say. For
    /// partitions about to be unassigned: librdkafka keeps a partition's pause across its revoke and a later
    /// assignment, while the pauses recorded here end at the revoke. Lifted then, while the partition is
    /// quiet, rather than after a new assignment, where the resume could make librdkafka drop that
    /// assignment's fetch start; right before the unassign, so that a revoked partition does not fetch
    /// while its handler runs.
    func liftPauses(_ partitions: some Sequence<KafkaTopicPartition>, _ state: inout State, handle: RDKafkaHandle?) {
        let paused = state.pausedInLibrdkafka.intersection(partitions)
        setPaused(false, paused, handle: handle)
        state.pausedInLibrdkafka.subtract(paused)
    }

    /// Resumes in librdkafka partitions the stranded-partition watch found idle with records to read,
    /// unless they are paused here (by the owner or the hand-off) by now: librdkafka may hold a pause
    /// nothing here asked for (an op it dropped; see KafkaConsumer+StrandedPartitions.swift).
    func resumeStranded(_ partitions: Set<KafkaTopicPartition>) {
        state.withLock { state in
            let resumable = partitions.filter { state.assigned[$0] != nil && !state.isPaused($0) }
            state.pausedInLibrdkafka.subtract(resumable)
            setPaused(false, resumable, handle: state.handle)
        }
    }

    /// Pauses `partition` in librdkafka without recording it: the stranded partition of
    /// confluentinc/librdkafka#5591, for tests of the watch that finds it.
    func strandForTesting(_ partition: KafkaTopicPartition) {
        state.withLock { state in _ = setPaused(true, [partition], handle: state.handle) }
    }

    /// Hands the poll thread what the stranded-partition watch holds stranded now, if that changed, and the
    /// partitions it found to restart (watch thread). Findings queue up rather than replace each other: a
    /// partition found and moving again before the poll thread looked must still show in the status (and the
    /// worker's log) once.
    func offerStranded(_ partitions: Set<KafkaTopicPartition>?, restarting: [StrandedPartition]) {
        guard partitions != nil || !restarting.isEmpty else { return }
        strandedOffers.withLock { $0.append((partitions, restarting)) }
        strandedOffered.store(true, ordering: .releasing)
    }

    /// Puts the watch's findings in the status, in order, and restarts the partitions it found (poll thread,
    /// which applies every status change and hands over every record).
    func takeOfferedStranded(client: RDKafkaClient) {
        strandedOffered.store(false, ordering: .releasing)
        let offers = strandedOffers.withLock { offers in
            defer { offers = [] }
            return offers
        }
        for (partitions, restarting) in offers {
            // A partition revoked since the watch looked is no longer this consumer's to report.
            if let partitions {
                updateStatus { state in
                    state.status.strandedPartitions = partitions.filter { state.assigned[$0] != nil }.sorted()
                }
            }
            if !restarting.isEmpty { StrandedPartitionWatch.restart(restarting, client: client, core: self) }
        }
    }

    private static func checkAssigned(
        _ partitions: [KafkaTopicPartition], in assignment: Set<KafkaTopicPartition>, action: String
    ) throws(KafkaError) {
        let unassigned = partitions.filter { !assignment.contains($0) }
        guard unassigned.isEmpty else {
            let list = unassigned.map(\.description).joined(separator: ", ")
            let owned = assignment.sorted().map(\.description).joined(separator: ", ")
            throw KafkaError(
                code: .partitionState,
                message: "cannot \(action) \(list): not assigned to this consumer (assigned: [\(owned)])"
            )
        }
    }

    /// Pauses or resumes `partitions` in librdkafka (nothing before the handle is set), and counts the
    /// change (`pauseChanges`).
    @discardableResult
    func setPaused(
        _ pause: Bool, _ partitions: Set<KafkaTopicPartition>, handle: RDKafkaHandle?
    ) -> KafkaError? {
        guard !partitions.isEmpty else { return nil }
        pauseChanges.add(1, ordering: .relaxed)
        return handle?.setPaused(pause, partitions)
    }
}
