// What the source calls on its own thread: a record arrives (taken, counted against the in-flight cap,
// handed to a lane), partitions are assigned, or revoked (their waiting pushes are withdrawn, and their
// records in flight get a bounded wait).

import APNs

extension Pipeline {
    public func received(_ record: SourceRecord) {
        let partition = record.topicPartition
        let (taken, appliesSteps, resizeDue) = state.withLock { state -> ((UInt64, SendWithdrawal)?, Bool, Bool) in
            // Checked under the lock, so that a revoke's `forget` comes either before (the record is not
            // current) or after (the record is in flight, and the revoke waits for it).
            guard state.receiving, !state.revoking.contains(partition), source.isCurrent(record) else {
                return (nil, false, false)
            }
            state.assigned.insert(partition)
            guard let generation = state.tracker.take(partition, offset: record.offset) else {
                return (nil, false, false)
            }
            let withdrawal: SendWithdrawal
            if let existing = state.withdrawals[partition] {
                withdrawal = existing
            } else {
                withdrawal = SendWithdrawal()
                state.withdrawals[partition] = withdrawal
            }
            state.counters.recordsTaken += 1
            let resizeDue = state.sizing.tick()
            if state.flow.recordTaken() == .pause { state.closeGateForAll() }
            // One partition holding the cap's worth of records (a slow one and those finished behind it)
            // stops fetching alone; the others go on.
            if state.tracker.held(partition) >= heldLimit(partition, state.flow),
                state.fetchStopped.insert(partition).inserted
            {
                state.flowSteps.append(.stopFetching([partition]))
                state.flowSteps.append(.report(paused: true, [partition]))
            }
            return ((generation, withdrawal), state.hasFlowSteps, resizeDue)
        }
        if appliesSteps { applyFlowSteps() }
        guard let (generation, withdrawal) = taken else { return }
        observer?.recordReceived(record)
        let item = TakenRecord(record: record, generation: generation, withdrawal: withdrawal)
        if let recordRunner, record.topic != configuration.retryTopic {
            recordRunner { [self] in begin(item) }
        } else {
            lanes.submit(item)
        }
        if resizeDue { resizeInFlightCap() }
    }

    /// Resizes the in-flight cap every `InFlightSizing.pausedInterval` while the pipeline is paused at it.
    /// Records taken and finished resize it otherwise, and a pipeline at its cap whose pushes wait out a long
    /// round trip takes and finishes none: at start-up the cap was sized before any connection was open (its
    /// lower bound, 256 records) and stayed there for the whole first round trip, 300 ms of 256 records in
    /// flight where the pools could carry thousands (docs/performance.md, 2026-12-07, eleventh session).
    func startResizingWhilePaused() {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: InFlightSizing.pausedInterval)
                guard let self else { return }
                if isPaused { resizeInFlightCap() }
            }
        }
        pausedResizer.withLock { $0 = task }
    }

    func stopResizingWhilePaused() {
        pausedResizer.withLock { task in
            task?.cancel()
            task = nil
        }
    }

    /// Sizes the in-flight cap from what the transport can carry now (read outside the lock: it takes the
    /// pools' locks), pausing or resuming consumption when the new cap calls for it.
    func resizeInFlightCap() {
        let streams = transport.streamCapacity
        let appliesSteps = state.withLock { state -> Bool in
            let capacity = state.sizing.capacity(streams: streams)
            guard capacity != state.flow.capacity else { return false }
            let lowWaterMark = configuration.resumeBelow ?? FlowControl.defaultLowWaterMark(capacity: capacity)
            switch state.flow.resize(capacity: capacity, lowWaterMark: lowWaterMark) {
            case .none: break
            case .pause: state.closeGateForAll()
            case .resume: state.reportRunning(state.openGateForAll())
            }
            return state.hasFlowSteps
        }
        if appliesSteps { applyFlowSteps() }
    }

    public func assigned(_ partitions: [TopicPartition]) {
        let appliesSteps = state.withLock { state -> Bool in
            state.assigned.formUnion(partitions)
            // Newly assigned partitions join a paused pipeline paused, and a running one running (the
            // source starts them fetching: a revoke ends their earlier pauses).
            state.flowSteps.append(state.flow.isPaused ? .closeGate(partitions) : .openGate(partitions))
            return state.hasFlowSteps
        }
        if appliesSteps { applyFlowSteps() }
    }

    public func revoking(_ partitions: [TopicPartition], deadline: ContinuousClock.Instant) async {
        // Pushes of these partitions that wait (for a pool that is down, a retry's delay, a paced device)
        // are withdrawn: they would keep the group's rebalance waiting for APNs, and be sent after the
        // records went to their next owner, who sends them too. What is on its way to APNs finishes, and
        // so do records taken before now that start meanwhile.
        let withdrawals = state.withLock { state in
            state.revoking.formUnion(partitions)
            return partitions.compactMap { state.withdrawals.removeValue(forKey: $0) }
        }
        for withdrawal in withdrawals { withdrawal.withdraw() }
        // Exactly-once: the last second is the transaction's that commits what finished.
        let waitUntil = transactions == nil ? deadline : deadline.advanced(by: .seconds(-1))
        while ContinuousClock.now < waitUntil {
            let running = state.withLock { state in partitions.reduce(0) { $0 + state.running($1) } }
            if running == 0 { break }
            try? await Task.sleep(for: .milliseconds(2))
        }
        // The partitions go now: a record of theirs that has not started yet never does.
        for withdrawal in withdrawals { withdrawal.close() }
        let (appliesSteps, handOver) = state.withLock { state -> (Bool, RecordsHandedOver) in
            var noLongerStopped: [TopicPartition] = []
            var handOver = RecordsHandedOver(cause: .revoke, releasedUnsent: [:], leftRunning: [:])
            for partition in partitions {
                // Withdrawn records stopped counting against the cap when they came back; the others
                // still run, and their finishes count down the cap.
                let released = state.withdrawnUnfinished.removeValue(forKey: partition) ?? 0
                let (unfinished, _) = state.tracker.forget(partition)
                let stillRunning = unfinished - released
                state.counters.abandonedAtRevoke += stillRunning
                if released > 0 { handOver.releasedUnsent[partition] = released }
                if stillRunning > 0 { handOver.leftRunning[partition] = stillRunning }
                state.assigned.remove(partition)
                state.revoking.remove(partition)
                if state.fetchStopped.remove(partition) != nil { noLongerStopped.append(partition) }
            }
            // Gone with the revoke (a new assignment starts fetching afresh), so no longer paused here.
            state.reportRunning(noLongerStopped)
            return (state.hasFlowSteps, handOver)
        }
        if appliesSteps { applyFlowSteps() }
        if !handOver.isEmpty { observer?.recordsHandedOver(handOver) }
        if let transactions {
            // Before the partitions go: what finished is committed with its offsets; the results of records
            // behind an unfinished one are dropped, and the next owner does those records again.
            _ = await transactions.commit(until: deadline)
            // A transaction under way when the commit's time ran out gets up to 2 s more to end.
            await transactions.release(partitions, waitingUntil: deadline.advanced(by: .seconds(2)))
        }
    }
}
