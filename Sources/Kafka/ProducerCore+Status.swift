// Whether records wait for the brokers: counted at each enqueue and delivery report, checked after
// each poll, and told to the status handler once per change.

extension ProducerCore {
    func currentStatus(now: ContinuousClock.Instant) -> KafkaProducerStatus {
        state.withLock { Self.status(of: $0, now: now) }
    }

    static func status(of state: State, now: ContinuousClock.Instant) -> KafkaProducerStatus {
        KafkaProducerStatus(
            unacknowledged: state.unacknowledged, isWaitingForBrokers: state.isWaiting,
            waitingFor: state.isWaiting ? now - state.lastProgress : nil,
            cause: state.isWaiting ? state.lastConnectionError : nil)
    }

    /// Counts a delivery report; a success while records waited ends the wait. On the poll thread.
    func noteDelivery(succeeded: Bool) {
        let now = ContinuousClock.now
        let ended: KafkaProducerStatus? = state.withLock { state in
            state.unacknowledged -= 1
            guard succeeded else {
                state.failedSinceProgress = true
                return nil
            }
            state.lastProgress = now
            state.failedSinceProgress = false
            state.lastConnectionError = nil
            guard state.isWaiting else { return nil }
            state.isWaiting = false
            return Self.status(of: state, now: now)
        }
        if let ended { statusHandler?(ended) }
    }

    /// Keeps librdkafka's last connection error, the likely cause of a wait.
    func noteClientError(_ error: KafkaError) {
        guard let code = error.librdkafkaCode, RDKafkaResponse.connectionErrors.contains(code) else { return }
        state.withLock { $0.lastConnectionError = error.message }
    }

    /// Starts a wait when records went unacknowledged for the threshold (only an acknowledgement ends it:
    /// records failed by a delivery timeout leave nothing unacknowledged until they are sent again).
    /// On the poll thread, after each poll.
    func checkWaiting() {
        let now = ContinuousClock.now
        let changed: KafkaProducerStatus? = state.withLock { state in
            guard !state.isWaiting, state.unacknowledged > 0,
                now - state.lastProgress >= waitThreshold
            else {
                return nil
            }
            state.isWaiting = true
            return Self.status(of: state, now: now)
        }
        if let changed { statusHandler?(changed) }
    }
}
