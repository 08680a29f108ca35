// Whether records wait for the brokers: counted at each enqueue and delivery report, checked after
// each poll, and told to the status handler once per change.

extension ProducerCore {
    func currentStatus(now: ContinuousClock.Instant) -> KafkaProducerStatus {
        state.withLock { status(of: $0, now: now) }
    }

    /// Under `state`'s lock.
    func status(of state: State, now: ContinuousClock.Instant) -> KafkaProducerStatus {
        let isWaiting = waitingForBrokers.load(ordering: .relaxed)
        return KafkaProducerStatus(
            unacknowledged: max(0, unacknowledged.load(ordering: .relaxed)), isWaitingForBrokers: isWaiting,
            waitingFor: isWaiting ? now - state.lastProgress : nil,
            cause: isWaiting ? state.lastConnectionError : nil)
    }

    /// Counts a delivery report. On the poll thread, inside the poll: the clock is read, and the lock taken,
    /// once per poll by `checkWaiting`, not once per report; only while records wait for the brokers does an
    /// acknowledgement look at once, so that the wait ends with it.
    func noteDelivery(succeeded: Bool) {
        unacknowledged.subtract(1, ordering: .relaxed)
        failedSinceProgress.store(!succeeded, ordering: .relaxed)
        guard succeeded else { return }
        acknowledgedSinceCheck.store(true, ordering: .relaxed)
        if waitingForBrokers.load(ordering: .relaxed) { checkWaiting() }
    }

    /// Keeps librdkafka's last connection error, the likely cause of a wait.
    func noteClientError(_ error: KafkaError) {
        guard let code = error.librdkafkaCode, RDKafkaResponse.connectionErrors.contains(code) else { return }
        state.withLock { $0.lastConnectionError = error.message }
    }

    /// After each poll, on the poll thread: an acknowledgement since the last look is progress, and ends a
    /// wait; records unacknowledged for the threshold, with none acknowledged meanwhile (records failed by a
    /// delivery timeout leave nothing unacknowledged until they are sent again), start one.
    func checkWaiting() {
        let now = ContinuousClock.now
        let acknowledged = acknowledgedSinceCheck.exchange(false, ordering: .relaxed)
        let changed: KafkaProducerStatus? = state.withLock { state in
            if acknowledged {
                state.lastProgress = now
                state.lastConnectionError = nil
                guard waitingForBrokers.exchange(false, ordering: .relaxed) else { return nil }
                return status(of: state, now: now)
            }
            guard !waitingForBrokers.load(ordering: .relaxed), unacknowledged.load(ordering: .relaxed) > 0,
                now - state.lastProgress >= waitThreshold
            else {
                return nil
            }
            waitingForBrokers.store(true, ordering: .relaxed)
            return status(of: state, now: now)
        }
        if let changed { statusHandler?(changed) }
    }
}
