// The consumer's poll thread: fetches records into the hand-off and serves callbacks (rebalances run
// here) until the consumer closes, then leaves the group.

extension KafkaConsumer {
    static let pollTimeoutMilliseconds: Int32 = 100
    /// How long a closing member waits for its first assignment; a group join normally completes
    /// well within it (the coordinator's rebalance delay is 3 s by default).
    static let firstAssignmentWait: Duration = .seconds(5)

    static func pollLoop(client: RDKafkaClient, core: ConsumerCore) {
        var stalledFetches = StalledFetchRestarter.isNeeded ? StalledFetchRestarter() : nil
        // Set when the record just delivered left room in the hand-off: the next poll needs no check.
        var leftRoom = false
        while core.isRunning {
            if !leftRoom && !core.waitForRoom() { core.throttle() }
            leftRoom = false
            let timeout = stalledFetches?.pollTimeoutMilliseconds ?? pollTimeoutMilliseconds
            let event = client.consumerPoll(milliseconds: timeout)
            // What the stranded-partition watch found, applied here with every other status change, and its
            // restarts, which no record handed over may overtake.
            if core.strandedOffered.load(ordering: .acquiring) { core.takeOfferedStranded(client: client) }
            switch event {
            case nil:
                guard stalledFetches != nil else { continue }
                let (paused, changes) = core.pausesAndChanges
                let restarted =
                    stalledFetches?.pollCameBackEmpty(client: client, paused: paused, stateChanges: changes) ?? 0
                if restarted > 0 { core.fetchRestarts.add(restarted, ordering: .relaxed) }
            case .partitionEnd?:
                continue
            case .message(let message)?:
                stalledFetches?.recordArrived(from: message.topicPartition)
                leftRoom = core.deliver(message)
            case .fatal?:
                let error = client.recordedFatalError ?? KafkaError(.fatal, "consumer", response: .fatal)
                core.fail(error)
                core.eventHandler?(.fatal(error))
            case .error(let response, let context)?:
                core.eventHandler?(
                    .error(
                        KafkaError(
                            .client, client.callbacks.redactor.redact(context),
                            response: response)))
            }
        }
        // A member still waiting for its first assignment is given up to firstAssignmentWait to get
        // it (see ConsumerCore.mustAwaitFirstAssignment); records fetched meanwhile are not handed
        // over, so their offsets are never stored and the group's next owner reads them.
        var waitUntil = ContinuousClock.now.advanced(by: firstAssignmentWait)
        if let closeBy = core.state.withLock({ $0.closeDeadline }) { waitUntil = min(waitUntil, closeBy) }
        core.setClosingStage("waiting for the first assignment (the group join is under way)")
        while core.mustAwaitFirstAssignment && ContinuousClock.now < waitUntil {
            client.consumerPollDiscarding(milliseconds: pollTimeoutMilliseconds)
        }
        // Closed by its deadline before the first assignment came: destroying the handle would abort the
        // process (see mustAwaitFirstAssignment), so it is left to the process's exit instead.
        if core.mustAwaitFirstAssignment { client.keepsHandleAtDeinit() }
        // Serves the final revoke (the rebalance handler runs here), commits and leaves the group.
        core.setClosingStage("in librdkafka's consumer close (final revoke, commit, leaving the group)")
        let response = client.closeConsumer()
        let error = response.isSuccess ? nil : KafkaError(.closed, "closing", response: response)
        core.finishClosing(error: error)
    }
}
