// What the consumer knows of its brokers and its group: read from librdkafka's error events and
// statistics and from rebalances, and told to the status handler once per change, in order.

extension ConsumerCore {
    /// Reads what librdkafka reports about its connections, then passes the event on.
    func observe(_ event: KafkaEvent) {
        switch event {
        case .error(let error):
            noteConnectionError(error)
            eventHandler?(event)
        case .statistics(let json):
            if let counts = BrokerStatistics.counts(in: json) { noteBrokers(up: counts.up, known: counts.known) }
            if forwardsStatistics { eventHandler?(event) }
        default:
            eventHandler?(event)
        }
    }

    private func noteConnectionError(_ error: KafkaError) {
        guard let code = error.librdkafkaCode, RDKafkaResponse.connectionErrors.contains(code) else { return }
        updateStatus { state in
            if code == RDKafkaResponse.allBrokersDown.rawValue {
                var cause = error.message
                if let last = state.lastConnectionError { cause += " (last connection error: \(last))" }
                state.status.brokersUp = 0
                state.status.brokersReachable = false
                state.status.brokersCause = cause
            } else {
                state.lastConnectionError = error.message
            }
        }
    }

    private func noteBrokers(up: Int, known: Int) {
        updateStatus { state in
            state.status.brokersUp = up
            state.status.brokersKnown = known
            if up > 0 {
                state.status.brokersReachable = true
                state.status.brokersCause = nil
                state.lastConnectionError = nil
            } else if known > 0, state.status.brokersReachable {
                state.status.brokersReachable = false
                state.status.brokersCause =
                    state.lastConnectionError
                    ?? "no connection to any of the \(known) known brokers is up"
            }
        }
    }

    func noteMembership(_ isMember: Bool, cause: String?) {
        updateStatus { state in
            state.status.isGroupMember = isMember
            state.status.membershipCause = isMember ? nil : cause
            state.status.partitionsAssigned = state.assignment.count
        }
    }

    /// Applies `change` under the lock and tells the status handler (outside it) if the status changed.
    /// Every caller runs on the poll thread, so changes reach the handler in order.
    func updateStatus(_ change: (inout State) -> Void) {
        let changed = state.withLock { state -> KafkaConsumerStatusChange? in
            let previous = state.status
            change(&state)
            guard previous != state.status else { return nil }
            return KafkaConsumerStatusChange(previous: previous, current: state.status)
        }
        if let changed { statusHandler?(changed) }
    }

    var status: KafkaConsumerStatus { state.withLock { $0.status } }
}
