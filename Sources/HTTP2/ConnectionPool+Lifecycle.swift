// Connection lifecycle: opening connections lazily up to the configured count, backing off after failed
// connects, retiring and replacing connections, and shutting down; the connections report here.

import Platform

extension ConnectionPool {
    /// Stops sending new streams on the connection with this id (from `HTTP2Response.connectionID`);
    /// its open streams finish, and later requests go to other or new connections. Use it when the
    /// server says the connection is no good (e.g. it answered that it is idle or shutting down).
    /// Unknown or already retired ids are ignored.
    public func retireConnection(id: UInt64, reason: String = "retired by the client") {
        // Out of the dispatch set at once, so that a retry sent right after this call opens or uses another
        // connection; the connection itself stops taking streams on its loop.
        let connection = state.withLock { state -> HTTP2Connection? in
            guard let index = state.entries.firstIndex(where: { $0.connection.id == id }) else { return nil }
            return state.moveToDraining(index)
        }
        guard let connection else { return }
        connection.loop.execute { connection.retireOnRequest(reason) }
    }

    /// Stops taking requests (queued ones fail with `.poolShutDown`), lets open streams finish for up to
    /// `gracePeriod`, then closes every connection. Returns when all are closed.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        var actions = Actions()
        let connections = state.withLock { state -> [HTTP2Connection] in
            state.isShutDown = true
            while let waiter = state.waiters.popFirst() {
                waiter.isWaiting = false
                actions.failures.append((waiter, error(.poolShutDown, "the pool was shut down")))
            }
            return (state.entries + state.draining).map(\.connection)
        }
        perform(actions)
        let forceAt = MonotonicClock.now() &+ gracePeriod.nanosecondsClamped
        for connection in connections {
            connection.loop.execute { connection.closeGracefully() }
            connection.loop.schedule(at: forceAt) {
                connection.close(
                    HTTP2ClientError(
                        .connectionClosed,
                        "the pool shut down before the response arrived", endpoint: connection.endpoint))
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.entries.isEmpty && state.draining.isEmpty { return true }
                state.shutdownWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Opens connections up to the target (`connectionCount`, or more while the pool is grown); after a
    /// failure only one attempt at a time, and not before the back-off has passed.
    func openConnectionsIfNeeded(_ state: inout State, now: UInt64, actions: inout Actions) {
        guard !state.isShutDown else { return }
        while state.entries.count < state.targetConnections, now >= state.backoffUntil {
            if state.consecutiveFailures > 0, state.entries.contains(where: { !$0.isReady }) { return }
            let connection = HTTP2Connection(
                loop: group.next(), settings: connectionSettings, tls: tls,
                delegate: self)
            state.entries.append(Entry(connection: connection))
            state.connectionsOpened += 1
            actions.starts.append(connection)
            if state.consecutiveFailures > 0 { return }
        }
    }
}

// MARK: - Connection events (on the connection's loop thread)

extension ConnectionPool: HTTP2ConnectionDelegate {
    func connectionDidBecomeReady(_ connection: HTTP2Connection, streamLimit: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            state.entries[index].isReady = true
            state.entries[index].limit = streamLimit
            state.highestStreamLimit = max(state.highestStreamLimit, streamLimit)
            state.consecutiveFailures = 0
            state.backoffUntil = 0
            state.lastConnectError = nil
            dispatchWaiters(&state, actions: &actions)
        }
        perform(actions)
    }

    func connection(_ connection: HTTP2Connection, streamLimitChangedTo limit: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            state.entries[index].limit = limit
            state.highestStreamLimit = max(state.highestStreamLimit, limit)
            dispatchWaiters(&state, actions: &actions)
        }
        perform(actions)
    }

    func connectionIsGoingAway(_ connection: HTTP2Connection) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else { return }
            _ = state.moveToDraining(index)
            if !state.waiters.isEmpty {
                openConnectionsIfNeeded(&state, now: MonotonicClock.now(), actions: &actions)
                dispatchWaiters(&state, actions: &actions)
            }
        }
        perform(actions)
    }

    func connection(_ connection: HTTP2Connection, didFinishStreams count: Int) {
        var actions = Actions()
        state.withLock { state in
            guard let index = state.index(of: connection) else {
                if let draining = state.draining.firstIndex(where: { $0.connection === connection }) {
                    state.draining[draining].inFlight -= count
                }
                return
            }
            state.entries[index].inFlight -= count
            if !state.waiters.isEmpty { dispatchWaiters(&state, actions: &actions) }
        }
        perform(actions)
    }

    func connectionDidClose(_ connection: HTTP2Connection, error closeError: HTTP2ClientError?, wasReady: Bool) {
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            var shrunk = false
            if let index = state.index(of: connection) {
                state.entries.remove(at: index)
            } else if let index = state.draining.firstIndex(where: { $0.connection === connection }) {
                shrunk = state.draining.remove(at: index).shrunk
            }
            // A grown pool shrinks as its connections close (the server closes idle ones; the pool retires
            // those it no longer needs, already counted out); it grows again when requests wait.
            if wasReady, !shrunk, state.targetConnections > configuration.connectionCount, state.waiters.isEmpty {
                state.targetConnections -= 1
            }
            if state.isShutDown {
                if state.entries.isEmpty && state.draining.isEmpty {
                    actions.shutdownWaiters = state.shutdownWaiters
                    state.shutdownWaiters = []
                }
                return
            }
            if let closeError, !wasReady {
                state.consecutiveFailures += 1
                state.connectFailures += 1
                state.lastConnectError = closeError
                let delay = configuration.reconnectBackoff.delay(afterFailures: state.consecutiveFailures)
                state.backoffUntil = now &+ delay.nanosecondsClamped
                if state.entries.isEmpty {
                    // Nobody left to serve the queue: tell waiters now rather than at their deadline.
                    var failure = closeError
                    failure.retryAfter = delay
                    while let waiter = state.waiters.popFirst() {
                        waiter.isWaiting = false
                        actions.failures.append((waiter, failure))
                    }
                }
            } else if closeError != nil || !state.waiters.isEmpty {
                // A working connection died (or a clean close left work queued): replace it now.
                openConnectionsIfNeeded(&state, now: now, actions: &actions)
            }
        }
        perform(actions)
    }
}
