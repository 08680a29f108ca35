// Pauses and resumes reach the source, and the observer, in the order the pipeline decided them. They
// are decided under the pipeline's lock by whichever thread takes or finishes a record, and applied
// after it: applied by each deciding thread itself, a pause decided first could reach the source after
// a resume decided later, which left the gate closed with nothing in flight to open it again (the
// worker stood still until a rebalance reopened its partitions). So every step is queued under the
// lock and applied under a second one, oldest first. A deciding thread returns only once its steps are
// applied (by itself or by the thread applying before it), so the reader never hands over a record
// past a pause it decided: the cap stays exact. Applying is short (the gate's lock, librdkafka's
// non-blocking pause, the observer's counters), so that second lock is held briefly.

extension Pipeline {
    /// One change to what the source hands over or fetches, or to what the observer is told.
    enum FlowStep {
        /// Stop or go on handing over these partitions' records (the in-flight cap).
        case closeGate([TopicPartition])
        case openGate([TopicPartition])
        /// Stop or go on fetching these partitions (one holds too many records behind a slow one).
        case stopFetching([TopicPartition])
        case resumeFetching([TopicPartition])
        /// Tell the observer these partitions paused or run again.
        case report(paused: Bool, [TopicPartition])
    }

    /// Applies the queued flow steps in order. Call after the lock under which steps were queued, never
    /// under it (the order of locks is this one, then the pipeline's).
    func applyFlowSteps() {
        flowStepsApplying.withLock { _ in
            let steps = state.withLock { state -> [FlowStep] in
                let steps = state.flowSteps
                state.flowSteps = []
                return steps
            }
            for step in steps {
                switch step {
                case .closeGate(let partitions): source.pause(partitions)
                case .openGate(let partitions): source.resume(partitions)
                case .stopFetching(let partitions): source.stopFetching(partitions)
                case .resumeFetching(let partitions): source.resumeFetching(partitions)
                case .report(let paused, let partitions): observer?.flowChanged(paused: paused, partitions: partitions)
                }
            }
        }
    }
}

extension Pipeline.State {
    /// Whether steps are queued: the caller applies them (`Pipeline.applyFlowSteps`) after the lock.
    var hasFlowSteps: Bool { !flowSteps.isEmpty }

    /// A record stopped counting against the in-flight cap: when that brings the records in flight to the
    /// low-water mark, every assigned partition is handed over again (those stopped behind a slow record
    /// still do not fetch). Returns the partitions that run again.
    mutating func recordStoppedCounting() -> [TopicPartition] {
        guard flow.recordsFinished(1) == .resume else { return [] }
        return openGateForAll()
    }

    /// The in-flight cap is reached: no assigned partition is handed over until it resumes.
    mutating func closeGateForAll() {
        let all = Array(assigned)
        flowSteps.append(.closeGate(all))
        flowSteps.append(.report(paused: true, all))
    }

    /// The records in flight fell to the low-water mark: every assigned partition is handed over again.
    /// Returns those that run again (not those stopped behind a slow record), for the caller to report.
    mutating func openGateForAll() -> [TopicPartition] {
        let all = Array(assigned)
        flowSteps.append(.openGate(all))
        return all.filter { !fetchStopped.contains($0) }
    }

    /// `released` records of `partition` stopped being held: a partition that stopped fetching fetches
    /// again once it holds no more than `limit`. Returns it when it does.
    mutating func fetchAgainIfRoom(_ partition: TopicPartition, released: Int, limit: Int) -> [TopicPartition] {
        guard released > 0, fetchStopped.contains(partition), tracker.held(partition) <= limit else { return [] }
        fetchStopped.remove(partition)
        flowSteps.append(.resumeFetching([partition]))
        return [partition]
    }

    /// Queues the observer's report of partitions that run again, if any.
    mutating func reportRunning(_ partitions: [TopicPartition]) {
        if !partitions.isEmpty { flowSteps.append(.report(paused: false, partitions)) }
    }
}
