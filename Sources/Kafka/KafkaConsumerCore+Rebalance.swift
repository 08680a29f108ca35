// Rebalances, on the poll thread inside librdkafka's callback: the assignment is applied, the owner's
// handler is run and waited for within its deadline, and revoked partitions are committed before they
// move. Both the EAGER and the COOPERATIVE protocol.

import Dispatch

extension ConsumerCore {
    /// Serves one rebalance, inside librdkafka's rebalance callback.
    func rebalance(_ rebalance: RDKafkaRebalance) {
        rebalanceCallbackEdges.add(1, ordering: .releasing)
        defer { rebalanceCallbackEdges.add(1, ordering: .releasing) }
        let partitions = rebalance.partitions
        switch rebalance.kind {
        case .assign:
            state.withLock { $0.everAssigned = true }
            assign(rebalance)
        case .revoke:
            revoke(rebalance)
        case .failed(let response):
            let error = KafkaError(.rebalance, "rebalance failed; dropping the assignment", response: response)
            eventHandler?(.error(error))
            let dropped = partitions.isEmpty ? state.withLock { Array($0.assignment) } : partitions
            dropFromState(dropped)
            noteMembership(false, cause: error.message)
            state.withLock { liftPauses(dropped, &$0, handle: rebalance.handle) }
            if rebalance.isCooperative {
                if let error = rebalance.incrementalUnassign("unassign") { eventHandler?(.error(error)) }
            } else {
                _ = rebalance.unassignAll("unassign")
            }
        }
    }

    private func assign(_ rebalance: RDKafkaRebalance) {
        let partitions = rebalance.partitions
        let cooperative = rebalance.isCooperative
        let failure = cooperative ? rebalance.incrementalAssign("incremental assign") : rebalance.assign("assign")
        if let failure { eventHandler?(.error(failure)) }
        state.withLock { state in
            if !cooperative {
                removeAssignment(nil, in: &state)
                state.pausedByOwner = []
                state.pausedForBuffer = []
            }
            addAssignment(partitions, in: &state)
            // Paused in librdkafka only once they have fetched (`applyPauses`): a pause now could drop the
            // fetch start librdkafka's main thread is about to issue.
            if state.isThrottled { state.pausedForBuffer.formUnion(partitions) }
            // Every unassign lifts librdkafka's pauses first, so none should be left here; one that is would
            // keep the partition from ever fetching, which is worse than the race a resume risks.
            liftPauses(partitions, &state, handle: rebalance.handle)
        }
        noteMembership(true, cause: nil)
        // Runs after the assign so the owner may pause these partitions from its handler.
        if !partitions.isEmpty {
            let deadline = ContinuousClock.now.advanced(by: rebalanceDeadline)
            runRebalanceHandler(.assigned(partitions.sorted()), deadline: deadline)
        }
    }

    private func revoke(_ rebalance: RDKafkaRebalance) {
        let partitions = rebalance.partitions
        let cooperative = rebalance.isCooperative
        let lost = rebalance.isAssignmentLost
        // Stop handing out these partitions' records first; they stay unstored, so the next owner gets them.
        dropFromState(partitions)
        if lost {
            noteMembership(
                false,
                cause: "the assignment was lost: the group went on without this member "
                    + "(its session timed out, or the coordinator could not be reached); rejoining")
        } else {
            noteMembership(true, cause: nil)
        }
        var deadline = ContinuousClock.now.advanced(by: rebalanceDeadline)
        // A bounded shutdown's drain deadline includes the revoke wait; it does not come on top of it.
        if let limit = waitLimit { deadline = min(deadline, limit) }
        if !partitions.isEmpty {
            setClosingStage("waiting for the rebalance handler to hand over revoked partitions")
            runRebalanceHandler(
                .revoked(
                    KafkaRevocation(
                        partitions: partitions.sorted(), deadline: deadline,
                        isLost: lost)), deadline: deadline)
        }
        if !lost {
            // Retrying is useful only where the group does not wait for this member (see below).
            var retryUntil = cooperative ? max(deadline, ContinuousClock.now.advanced(by: .seconds(1))) : nil
            if let retry = retryUntil, let closeBy = state.withLock({ $0.closeDeadline }) {
                retryUntil = min(retry, closeBy)
            }
            setClosingStage("committing offsets before releasing revoked partitions")
            commitBeforeRelease(rebalance.handle, partitions, retryUntil: retryUntil)
        }
        state.withLock { liftPauses(partitions, &$0, handle: rebalance.handle) }
        let failure =
            cooperative
            ? rebalance.incrementalUnassign("incremental unassign") : rebalance.unassignAll("unassign")
        if let failure { eventHandler?(.error(failure)) }
        // The final revoke comes from within librdkafka's consumer close, which then leaves the group.
        if !isRunning { setClosingStage("in librdkafka's consumer close (leaving the group)") }
    }

    /// Commits the stored offsets synchronously, so what the handler stored is in Kafka before the
    /// partitions move.
    ///
    /// With the COOPERATIVE protocol this runs after the group's SyncGroup, and a coordinator still
    /// completing the round (other members not yet synced) answers REBALANCE_IN_PROGRESS for a while,
    /// so retriable answers are retried until `retryUntil` (the revocation deadline, at least a
    /// second). With the EAGER protocol the revoke comes before this member rejoins, while the group
    /// waits for it, so there is one attempt (brokers accept that commit; librdkafka's mock cluster
    /// refuses it).
    private func commitBeforeRelease(
        _ handle: RDKafkaHandle, _ partitions: [KafkaTopicPartition], retryUntil: ContinuousClock.Instant?
    ) {
        var attempts = 0
        while true {
            attempts += 1
            guard let response = handle.commitStoredOffsets(blocking: true) else { return }
            let retriable = RDKafkaResponse.retriableCommitErrors.contains(response.rawValue)
            guard retriable, let retryUntil, ContinuousClock.now < retryUntil else {
                let list = partitions.map(\.description).joined(separator: ", ")
                eventHandler?(
                    .error(
                        KafkaError(
                            .commit,
                            "gave up committing before releasing revoked \(list) after \(attempts) attempt(s); "
                                + "their records since the last commit will be delivered again to the next owner",
                            response: response
                        )))
                return
            }
            DedicatedThread.sleep(milliseconds: 20)
        }
    }

    private func dropFromState(_ partitions: [KafkaTopicPartition]) {
        let revoked = Set(partitions)
        state.withLock { state in
            removeAssignment(revoked, in: &state)
            state.pausedByOwner.subtract(revoked)
            state.pausedForBuffer.subtract(revoked)
            state.buffer.removeAll { revoked.contains($0.topicPartition) }
            resumeIfDrained(&state)
        }
    }

    /// Runs the owner's handler and waits for it on this (the poll) thread: until a little after the
    /// event's deadline (the handler returns once it has passed), and never longer after a close
    /// deadline or revocation limit, even one set while it waits.
    private func runRebalanceHandler(_ event: KafkaRebalanceEvent, deadline: ContinuousClock.Instant) {
        guard let handler = rebalanceHandler else { return }
        let done = DispatchSemaphore(value: 0)
        Task {
            await handler(event)
            done.signal()
        }
        let started = ContinuousClock.now
        let waitUntil = deadline.advanced(by: Self.handlerReturnAllowance)
        while true {
            var until = waitUntil
            if let limit = waitLimit { until = min(until, limit.advanced(by: Self.handlerReturnAllowance)) }
            let now = ContinuousClock.now
            if now >= until { break }
            let slice = min(until - now, Self.limitCheckInterval)
            let milliseconds = Int(clamping: slice.wholeMilliseconds)
            if done.wait(timeout: .now() + .milliseconds(milliseconds)) == .success { return }
        }
        if done.wait(timeout: .now()) == .success { return }
        eventHandler?(
            .error(
                KafkaError(
                    code: .timeout,
                    message:
                        "rebalance handler did not return within \(ContinuousClock.now - started) (its deadline, or a "
                        + "shutdown's, passed); continuing without it"
                )))
    }

    /// How long after its deadline a rebalance handler may take to return (it then only forgets state).
    private static let handlerReturnAllowance: Duration = .milliseconds(200)
    /// How often a wait for the rebalance handler looks for a deadline set meanwhile.
    private static let limitCheckInterval: Duration = .milliseconds(20)
}
