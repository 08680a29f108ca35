// Pauses are kept in two sets: the owner's (its flow control) and the hand-off's (a full buffer), so
// that resuming one never resumes a partition the other still holds.

extension ConsumerCore {
    func pauseByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "pause")
            let fresh = Set(partitions).subtracting(state.pausedByOwner).subtracting(state.pausedForBuffer)
            state.pausedByOwner.formUnion(partitions)
            if let error = setPaused(true, fresh, handle: state.handle) { throw error }
        }
    }

    func resumeByOwner(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try state.withLock { state throws(KafkaError) in
            try Self.checkAssigned(partitions, in: state.assignment, action: "resume")
            let paused = Set(partitions).intersection(state.pausedByOwner)
            state.pausedByOwner.subtract(paused)
            // A partition the full hand-off also paused stays paused until the hand-off drains.
            if let error = setPaused(false, paused.subtracting(state.pausedForBuffer), handle: state.handle) {
                throw error
            }
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
