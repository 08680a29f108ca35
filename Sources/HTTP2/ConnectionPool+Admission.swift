// Admission: a request goes straight to a ready connection with a free stream, else waits in the bounded
// FIFO queue until one frees (or its deadline passes), else fails at once with a reason the caller can act on.

import Platform

extension ConnectionPool {
    /// Sends `request` and returns the complete response.
    ///
    /// Empty `scheme` and `authority` are filled in with `https` and the pool's authority.
    /// - Parameter timeout: overrides the configuration's `requestTimeout` (queueing included).
    /// - Throws: `HTTP2ClientError` (see its codes), or `CancellationError` when the task is cancelled
    ///   (an open stream is then reset).
    ///
    /// Runs on the caller's executor (`nonisolated(nonsending)`), so a task on an event loop's executor
    /// submits without a hop.
    nonisolated(nonsending)
        public func send(_ request: consuming HTTP2Request, timeout: Duration? = nil) async throws -> HTTP2Response
    {
        try Task.checkCancellation()
        if !request.hasSchemeAndAuthority {
            if request.scheme.isEmpty { request.scheme = "https" }
            if request.authority.isEmpty { request.authority = authority }
        }
        let timeoutNanoseconds = timeout?.nanosecondsClamped ?? requestTimeoutNanoseconds
        let ticket = HTTP2StreamTicket(
            request: consume request,
            deadline: MonotonicClock.now() &+ timeoutNanoseconds, timeoutNanoseconds: timeoutNanoseconds)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<HTTP2Response, any Error>) in
                if ticket.install(continuation) { enqueue(ticket) }
            }
        } onCancel: {
            cancel(ticket)
        }
    }

    /// Sends `request` and calls `onResponse` exactly once with the complete response or the error: on
    /// the connection's loop thread, or before `start` returns when the request fails at once (the pool
    /// is shut down, its queue is full).
    ///
    /// For callers that fan out many requests and wait once for all of them: no continuation, task or
    /// cancellation handler per request. Not cancellable: the request ends with its response, its
    /// timeout (`timeout`, else the configuration's `requestTimeout`, queueing included) or the pool's
    /// shutdown. Empty `scheme` and `authority` are filled in as `send` does.
    public func start(
        _ request: consuming HTTP2Request, timeout: Duration? = nil,
        onResponse: @escaping @Sendable (Result<HTTP2Response, any Error>) -> Void
    ) {
        if !request.hasSchemeAndAuthority {
            if request.scheme.isEmpty { request.scheme = "https" }
            if request.authority.isEmpty { request.authority = authority }
        }
        let timeoutNanoseconds = timeout?.nanosecondsClamped ?? requestTimeoutNanoseconds
        enqueue(
            HTTP2StreamTicket(
                request: consume request, deadline: MonotonicClock.now() &+ timeoutNanoseconds,
                timeoutNanoseconds: timeoutNanoseconds, onFinish: onResponse))
    }

    // MARK: Dispatch

    func enqueue(_ ticket: HTTP2StreamTicket) {
        // The common case, without building an action list: a ready connection has a free stream.
        let direct = state.withLock { state -> HTTP2Connection? in
            let grown = state.entries.count >= state.targetConnections || state.consecutiveFailures > 0
            guard !state.isShutDown, grown, let index = state.leastLoadedReady()
            else { return nil }
            state.entries[index].inFlight += 1
            let connection = state.entries[index].connection
            ticket.dispatchedTo = connection
            return connection
        }
        if let direct {
            direct.loop.enqueue(.submit(direct, ticket))
            return
        }
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            if state.isShutDown {
                actions.failures.append((ticket, error(.poolShutDown, "the pool is shut down")))
                return
            }
            openConnectionsIfNeeded(&state, now: now, actions: &actions)
            if let index = state.leastLoadedReady() {
                state.entries[index].inFlight += 1
                ticket.dispatchedTo = state.entries[index].connection
                actions.dispatches.append((state.entries[index].connection, ticket))
                return
            }
            if state.entries.isEmpty {
                actions.failures.append((ticket, unavailableError(state, now: now)))
                return
            }
            growIfSaturated(&state, actions: &actions)
            guard state.waiters.append(ticket) else {
                actions.failures.append(
                    (
                        ticket,
                        error(
                            .poolSaturated,
                            "every stream is busy and \(state.waiters.capacity) requests are already waiting; "
                                + "send more slowly or raise connectionCount / maximumQueuedRequests")
                    ))
                return
            }
            ticket.isWaiting = true
            if !state.expiryScheduled {
                state.expiryScheduled = true
                actions.scheduleExpiry = true
            }
        }
        perform(actions)
    }

    func cancel(_ ticket: HTTP2StreamTicket) {
        enum Where {
            case removed
            case dispatched(HTTP2Connection)
            case nowhere
        }
        let place = state.withLock { state -> Where in
            if ticket.isWaiting {
                ticket.isWaiting = false
                _ = state.waiters.removeAll { $0 === ticket }
                return .removed
            }
            if let connection = ticket.dispatchedTo { return .dispatched(connection) }
            return .nowhere
        }
        switch place {
        case .removed, .nowhere:
            ticket.finish(.failure(CancellationError()))
        case .dispatched(let connection):
            connection.loop.enqueue(.cancel(connection, ticket))
        }
    }

    /// Requests wait with every stream busy: once the oldest has waited `growthWait`, open as many more
    /// connections as the requests waiting need beyond what the connections still connecting will take
    /// (each counted at the highest stream limit the pool's connections have had), up to the ceiling. Not while no
    /// connection is ready: until one is, nothing says the server can be reached, nor what it allows.
    ///
    /// Against a far server a connection costs its TCP and TLS round trips before its first stream. A pool
    /// that opened the next connection only once the last was ready grew by one per handshake (0.6 s each at
    /// a 300 ms round trip: 5.4 s from 4 connections to 13 in `bench pipeline --apns-latency-ms 300`); this
    /// one opens what the queue asks for at once and overlaps the handshakes.
    func growIfSaturated(_ state: inout State, actions: inout Actions) {
        guard state.targetConnections < configuration.connectionCeiling, state.consecutiveFailures == 0,
            let oldest = state.waiters.first, state.entries.count >= state.targetConnections
        else { return }
        let ready = state.entries.reduce(0) { $0 + ($1.isReady ? 1 : 0) }
        guard ready > 0 else { return }
        let perConnection = max(1, state.highestStreamLimit)
        let uncovered = state.waiters.count - (state.entries.count - ready) * perConnection
        guard uncovered > 0 else { return }
        let now = MonotonicClock.now()
        let enqueuedAt = oldest.deadline &- oldest.timeoutNanoseconds
        guard now &- enqueuedAt >= growthWaitNanoseconds else { return }
        let wanted = (uncovered + perConnection - 1) / perConnection
        state.targetConnections = min(configuration.connectionCeiling, state.targetConnections + wanted)
        state.underusedSince = now
        if !state.shrinkCheckScheduled {
            state.shrinkCheckScheduled = true
            actions.scheduleShrinkCheck = true
        }
        openConnectionsIfNeeded(&state, now: now, actions: &actions)
    }

    /// Hands queued requests to ready connections with free streams, oldest first.
    func dispatchWaiters(_ state: inout State, actions: inout Actions) {
        while let first = state.waiters.first {
            if first.isFinished {
                _ = state.waiters.popFirst()
                first.isWaiting = false
                continue
            }
            guard let index = state.leastLoadedReady() else {
                // Requests still wait with every stream busy: the moment to grow (a connection that became
                // ready or finished streams, not only a new request, may find the pool saturated).
                growIfSaturated(&state, actions: &actions)
                return
            }
            _ = state.waiters.popFirst()
            first.isWaiting = false
            state.entries[index].inFlight += 1
            first.dispatchedTo = state.entries[index].connection
            actions.dispatches.append((state.entries[index].connection, first))
        }
    }

    func unavailableError(_ state: State, now: UInt64) -> HTTP2ClientError {
        let wait = state.backoffUntil > now ? Duration.nanoseconds(Int64(state.backoffUntil - now)) : Duration.zero
        let last = state.lastConnectError?.message ?? "no connection"
        // A proxy's refusal keeps its name: it, not the server, is what to fix.
        let code = state.lastConnectError.map(\.code).flatMap {
            HTTP2ClientError.Code.proxyCodes.contains($0) ? $0 : nil
        }
        return HTTP2ClientError(
            code ?? .connectFailed,
            "no connection to the server (last attempt: \(last)); "
                + "next attempt in \(Int((wait.seconds * 1000).rounded())) ms", endpoint: endpoint, retryAfter: wait)
    }

    func expireWaiters() {
        let now = MonotonicClock.now()
        var actions = Actions()
        state.withLock { state in
            let expired = state.waiters.removeAll { $0.isFinished || $0.deadline <= now }
            for ticket in expired where !ticket.isFinished {
                ticket.isWaiting = false
                // Never sent: the worker's own pool was full, so the caller may send it again uncounted.
                actions.failures.append(
                    (
                        ticket,
                        error(
                            .poolSaturated,
                            "no free stream within \(formatNanoseconds(ticket.timeoutNanoseconds)) "
                                + "(\(state.entries.filter(\.isReady).count) ready connections, all streams busy or "
                                + "still connecting); the request was not sent")
                    ))
            }
            if state.waiters.isEmpty {
                state.expiryScheduled = false
            } else {
                actions.scheduleExpiry = true
            }
        }
        perform(actions)
    }
}
