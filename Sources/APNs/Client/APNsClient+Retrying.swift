// The client's retry loop: what one attempt recorded, when the breaker holds a push instead of
// counting a fault against it, and the limits (hold time, expiration) that finish a push.

import Foundation
import HTTP2
import Platform

extension APNsClient {
    /// One attempt, recorded.
    struct RecordedAttempt: Sendable {
        var record: DeliveryAttempt
        var outcome: AttemptOutcome
        var response: APNsResponse?
        var connectionID: UInt64 = 0
        var token: ProviderToken?
    }

    static func newAttempt(_ request: APNsRequest) -> RecordedAttempt {
        RecordedAttempt(
            record: DeliveryAttempt(
                apnsID: request.apnsID, httpStatus: nil, reason: nil,
                errorMessage: nil, startedAt: Date(), latency: .zero), outcome: .cancelled)
    }

    nonisolated(nonsending)
        func attemptOnce(
            _ request: APNsRequest, clock: ContinuousClock,
            start attemptStart: ContinuousClock.Instant, probe: Bool, credentialProbe: Bool = false
        ) async -> RecordedAttempt
    {
        var attempt = Self.newAttempt(request)
        do {
            let (http, token) = try prepare(request)
            let httpResponse = try await pool(for: request.environment).send(http)
            record(httpResponse, token: token, in: &attempt)
        } catch {
            Self.record(error, in: &attempt)
        }
        attempt.record.latency = attemptStart.duration(to: clock.now)
        attemptEnded(request, attempt, probe: probe, credentialProbe: credentialProbe)
        return attempt
    }

    /// Tells what an ended attempt says to those who listen: the metrics, the pool's breaker (with when the
    /// request was sent: it takes verdicts in send order), its credential gate, and the device's pacing.
    func attemptEnded(_ request: APNsRequest, _ attempt: RecordedAttempt, probe: Bool, credentialProbe: Bool = false) {
        observe(request, attempt)
        // An acceptance while nothing is refused says nothing new, and is most answers: not looked into.
        let gate = credentialGate(for: request.environment)
        if credentialProbe || attempt.record.httpStatus != 200 || gate.isRefusing {
            gate.record(attempt.outcome, probe: credentialProbe)
        }
        let now = MonotonicClock.now()
        let sentAt = now &- attempt.record.latency.nanosecondsClamped
        breaker(for: request.environment).record(CircuitBreaker.Verdict(attempt.outcome), probe: probe, sentAt: sentAt)
        pace(request, after: attempt, sentAt: sentAt, now: now)
    }

    /// The delay before retrying a push whose attempt met a fault of its degraded pool (the breaker closed,
    /// but the pool's other pushes fail too: `CircuitBreaker.faultsAreThePools`), or nil when the policy
    /// decides as usual. Such a retry spends neither an attempt nor `maximumTotalTime`, only hold time, like
    /// a wait for an open breaker; its delay grows as the policy's backoff does (never below APNs'
    /// Retry-After), so a pool in trouble is not hammered.
    private func excusedRetryDelay(
        after attempt: RecordedAttempt, of request: APNsRequest, policy: RetryPolicy, breaker: CircuitBreaker,
        clock: ContinuousClock, ownFaultTimes: inout [ContinuousClock.Instant], excusedRetries: inout Int
    ) -> Duration? {
        guard case .fault = CircuitBreaker.Verdict(attempt.outcome) else { return nil }
        let now = clock.now
        let window = breaker.configuration.windowDuration * 2
        ownFaultTimes.removeAll { $0.duration(to: now) > window }
        ownFaultTimes.append(now)
        guard breaker.faultsAreThePools(ownFaults: ownFaultTimes.count) else { return nil }
        excusedRetries += 1
        var wait = policy.backoff.delay(afterFailures: excusedRetries)
        if case .response(_, let retryAfter?) = attempt.outcome { wait = max(wait, retryAfter) }
        return wait
    }

    /// Waits for the device's next slot: time spent waiting for it is APNs' pacing of the device, like the
    /// breaker's hold, not time the push spent failing (it is added to `excused`). A slot voided by a rate
    /// cut while the push waited is taken again at the new rate. Returns nil when the push may go now, or
    /// the result that ends it instead: expired before its slot, withdrawn, cancelled, or held past the limit.
    private func waitForSlot(
        of token: DeviceToken, _ request: APNsRequest, last: RecordedAttempt?, attempts: [DeliveryAttempt],
        excused: inout Duration, policy: RetryPolicy, withdrawal: SendWithdrawal?
    ) async -> DeliveryResult? {
        while true {
            let slot = deviceThrottle.reserveSlot(for: token.hex)
            let wait = slot.delay
            if wait == .zero { return nil }
            if let left = timeToExpiration(of: request), wait >= left {
                return DeliveryResult(
                    status: .expired, response: last?.response, attempts: attempts,
                    summary: "the notification expires before APNs lets another push reach its device "
                        + "(429 TooManyRequests); it was not sent again")
            }
            do {
                guard try await Self.sleep(for: wait, unless: withdrawal) else {
                    return Self.withdrawn(last, attempts, "while APNs paced pushes to its device")
                }
            } catch {
                return DeliveryResult(
                    status: .failed, response: last?.response, attempts: attempts,
                    summary: "cancelled while waiting for APNs to accept pushes to its device again")
            }
            excused += wait
            if excused > policy.maximumHoldTime {
                return heldPastLimit(last, attempts, waited: excused, policy: policy)
            }
            if deviceThrottle.isCurrent(slot) { return nil }
        }
    }

    /// Stops using the connection that gave `attempt` its answer (IdleTimeout, Shutdown, UnrelatedKeyIdInToken).
    private func retire(_ attempt: RecordedAttempt, of request: APNsRequest) {
        pool(for: request.environment).retireConnection(
            id: attempt.connectionID,
            reason: "APNs answered \(attempt.response?.reason?.rawValue ?? "a connection error")")
    }

    /// Whether pushes to the request's device are paced (APNs answered it 429 TooManyRequests).
    func isPaced(_ request: APNsRequest) -> Bool {
        guard let token = request.deviceToken else { return false }
        return deviceThrottle.isThrottled(token.hex)
    }

    /// Tells the device throttle what APNs said about the request's device: 429 TooManyRequests slows
    /// it down, an acceptance speeds a paced device up again.
    private func pace(_ request: APNsRequest, after attempt: RecordedAttempt, sentAt: UInt64, now: UInt64) {
        guard let token = request.deviceToken, case .response(let response, let retryAfter) = attempt.outcome
        else { return }
        if response.isAccepted {
            deviceThrottle.delivered(token.hex)
        } else if response.reason == .tooManyRequests {
            deviceThrottle.refused(token.hex, retryAfter: retryAfter, sentAt: sentAt, now: now)
        }
    }

    /// Whether an attempt failed with a fault of its pool while the pool's breaker is not closed: the
    /// attempt is then the pool's failure, not the push's, and the push waits for the breaker.
    func isHeldByBreaker(_ attempt: RecordedAttempt, environment: APNsEnvironment) -> Bool {
        guard case .fault = CircuitBreaker.Verdict(attempt.outcome) else { return false }
        return !breaker(for: environment).isClosed
    }

    /// An attempt that got an HTTP response, whatever its status.
    func record(_ httpResponse: HTTP2Response, token: ProviderToken?, in attempt: inout RecordedAttempt) {
        let (response, retryAfter) = interpret(httpResponse)
        // Kept only for a rejection: the retry loop invalidates exactly the token APNs refused.
        if response.status != 200 { attempt.token = token }
        attempt.connectionID = httpResponse.connectionID
        attempt.record.httpStatus = response.status
        attempt.record.reason = response.reason?.rawValue
        attempt.response = response
        // The response's last use, so moved rather than copied.
        attempt.outcome = .response(response, retryAfter: retryAfter)
    }

    /// An attempt that got no response: the request was invalid, no token could be made, the transport
    /// failed or the task was cancelled.
    static func record(_ error: any Error, in attempt: inout RecordedAttempt) {
        switch error {
        case let error as HTTP2ClientError:
            attempt.outcome = .transportFailure(error)
            attempt.record.reason = error.code.description
            attempt.record.errorMessage = error.message
        case let error as APNsInvalidRequest:
            attempt.outcome = .invalidRequest(error.description)
            attempt.record.reason = "invalidRequest"
            attempt.record.errorMessage = error.description
        case let error as CredentialError:
            attempt.outcome = .credentialFailure(error.description)
            attempt.record.reason = "credential"
            attempt.record.errorMessage = error.description
        case is CancellationError:
            attempt.outcome = .cancelled
            attempt.record.reason = "cancelled"
        default:
            attempt.outcome = .credentialFailure("\(error)")
            attempt.record.reason = "error"
            attempt.record.errorMessage = "\(error)"
        }
    }

    /// The retry loop, entered after a first attempt that was not accepted or not sent.
    ///
    /// Counts against `maximumAttempts` and `maximumTotalTime` only what is the push's own doing: an
    /// attempt that never reached APNs is resent without counting (spaced by `resendBackoff`), and one
    /// that failed with a fault of its pool while the pool's breaker opened waits for the breaker without
    /// counting. Waiting ends when the breaker lets the push through, as `expired` when the push's
    /// expiration or the hold limit comes first, or as `withdrawn` when `withdrawal` is withdrawn.
    func retry(
        _ request: APNsRequest, policy: RetryPolicy, after first: RecordedAttempt?,
        firstStart: ContinuousClock.Instant, clock: ContinuousClock, withdrawal: SendWithdrawal? = nil
    ) async -> DeliveryResult {
        let breaker = breaker(for: request.environment)
        var attempts: [DeliveryAttempt] = []
        var counted = 0
        var resendsInARow = 0
        var tokenRefreshes = 0
        // Time that counts against the hold limit and not against `maximumTotalTime`.
        var excused = Duration.zero
        // When this push's attempts met pool faults, and its retries after faults the pool was to blame for.
        var ownFaultTimes: [ContinuousClock.Instant] = []
        var excusedFaultRetries = 0
        var last = first
        var current = request
        while true {
            var delay = Duration.zero
            // The part of `excused` that is this round's `delay`, counted before it is waited.
            var excusedAhead = Duration.zero
            if let attempt = last {
                Self.keep(attempt, in: &attempts)
                if isHeldByBreaker(attempt, environment: request.environment) {
                    excused += attempt.record.latency
                    // The breaker decides when the pool may try again, but not sooner than APNs said for
                    // this push: a probe that closes the breaker within a second does not cut a Retry-After.
                    if case .response(_, let retryAfter?) = attempt.outcome, retryAfter > .zero {
                        if let expiry = RetryPolicy.expiry(
                            before: retryAfter, timeToExpiration: timeToExpiration(of: request),
                            waitingFor: "APNs' Retry-After of")
                        {
                            return DeliveryResult(
                                status: .expired, response: attempt.response, attempts: attempts,
                                summary: "\(expiry); it was not sent again")
                        }
                        delay = retryAfter
                        excused += retryAfter
                        excusedAhead = retryAfter
                    }
                } else if let wait = excusedRetryDelay(
                    after: attempt, of: request, policy: policy, breaker: breaker, clock: clock,
                    ownFaultTimes: &ownFaultTimes, excusedRetries: &excusedFaultRetries)
                {
                    if let expiry = RetryPolicy.expiry(
                        before: wait, timeToExpiration: timeToExpiration(of: request), waitingFor: "a retry in")
                    {
                        return DeliveryResult(
                            status: .expired, response: attempt.response, attempts: attempts,
                            summary: "\(expiry); last: \(attempt.record.reason ?? "a fault of its pool")")
                    }
                    delay = wait
                    excused += attempt.record.latency + wait
                    excusedAhead = wait
                } else {
                    let decision = policy.decide(
                        after: attempt.outcome, attempts: counted + 1,
                        elapsed: firstStart.duration(to: clock.now) - excused,
                        timeToExpiration: timeToExpiration(of: request))
                    switch decision {
                    case .finish(let status, let because):
                        return DeliveryResult(
                            status: status, response: attempt.response, attempts: attempts,
                            summary: because)
                    case .resend(let action):
                        if action == .useNewConnection { retire(attempt, of: request) }
                        resendsInARow += 1
                        delay = policy.resendDelay(afterResends: resendsInARow)
                        excused += attempt.record.latency + delay
                        excusedAhead = delay
                    case .retry(let retryDelay, let action):
                        counted += 1
                        resendsInARow = 0
                        delay = retryDelay
                        switch action {
                        case .none: break
                        case .useNewConnection:
                            retire(attempt, of: request)
                        case .refreshProviderToken:
                            // Expired again with a token signed after the first refusal: the token is not
                            // the problem (a clock far off, say); the credential is, not the push.
                            tokenRefreshes += 1
                            if tokenRefreshes > 1 {
                                if let response = attempt.response {
                                    credentialGate(for: request.environment).expiredAgainAfterRefresh(response)
                                }
                                return DeliveryResult(
                                    status: .credentialRefused, response: attempt.response,
                                    attempts: attempts,
                                    summary: "APNs answered ExpiredProviderToken again after "
                                        + "the token was refreshed; is the system clock right?")
                            }
                            signer?.invalidate(attempt.token)
                        }
                    }
                }
            }
            if excused > policy.maximumHoldTime {
                return heldPastLimit(
                    last, attempts, waited: excused - excusedAhead, ahead: excusedAhead, policy: policy)
            }
            if delay > .zero {
                do {
                    guard try await Self.sleep(for: delay, unless: withdrawal) else {
                        return Self.withdrawn(last, attempts, "while waiting to retry")
                    }
                } catch {
                    return DeliveryResult(
                        status: .failed, response: last?.response, attempts: attempts,
                        summary: "cancelled while waiting to retry")
                }
            }
            var probe = false
            if !breaker.isClosed {
                let holdStart = clock.now
                var wait = policy.maximumHoldTime - excused
                if let left = timeToExpiration(of: request) { wait = min(wait, left) }
                let deadline = MonotonicClock.now() &+ max(wait, .zero).nanosecondsClamped
                let admission = await breaker.admit(deadline: deadline, withdrawal: withdrawal)
                excused += holdStart.duration(to: clock.now)
                switch admission {
                case .go(let isProbe):
                    probe = isProbe
                case .withdrawn:
                    return Self.withdrawn(last, attempts, "while its pool could not reach APNs")
                case .deadlinePassed:
                    if let left = timeToExpiration(of: request), left <= .zero {
                        return DeliveryResult(
                            status: .expired, response: last?.response, attempts: attempts,
                            summary: "the notification expired while APNs could not be reached; it was not sent again")
                    }
                    return heldPastLimit(last, attempts, waited: excused, policy: policy)
                }
            }
            if let token = request.deviceToken,
                let ended = await waitForSlot(
                    of: token, request, last: last, attempts: attempts, excused: &excused, policy: policy,
                    withdrawal: withdrawal)
            {
                // A push that is the breaker's probe gives the probe back on every way out that does not send
                // it: a probe taken and never answered would hold the pool half-open for good.
                if probe { breaker.record(.neutral, probe: true) }
                return ended
            }
            // Released by a breaker that closed (or made the probe) after the sender withdrew it: not sent.
            if withdrawal?.isWithdrawn == true {
                if probe { breaker.record(.neutral, probe: true) }
                return Self.withdrawn(last, attempts, "before it was sent again")
            }
            // Every attempt after the first carries a fresh apns-id; the first is the request's own.
            if last != nil { current.apnsID = .random() }
            let attempt = await attemptOnce(current, clock: clock, start: clock.now, probe: probe)
            if attempt.record.httpStatus == 200, let response = attempt.response {
                Self.keep(attempt, in: &attempts)
                return DeliveryResult(
                    status: .delivered, response: response, attempts: attempts,
                    summary: "accepted by APNs")
            }
            last = attempt
        }
    }

    /// Tells the attempt observer about an attempt that left the worker (one the pool had no room for did
    /// not: it is no request to APNs).
    func observe(_ request: APNsRequest, _ attempt: RecordedAttempt) {
        guard let observer = configuration.attemptObserver else { return }
        if case .transportFailure(let error) = attempt.outcome, error.code == .poolSaturated { return }
        observer(request, attempt.record)
    }

    /// Attempts a result keeps at most: the first, and the latest after it. A GOAWAY storm can resend a
    /// push many times, and an outcome record must stay small (its schema allows 100).
    static let keptAttempts = 32

    /// Adds an attempt to a result's list: every one that left the worker (a request the pool had no room
    /// for never did), the first and the latest `keptAttempts - 1` of them.
    static func keep(_ attempt: RecordedAttempt, in attempts: inout [DeliveryAttempt]) {
        if case .transportFailure(let error) = attempt.outcome, error.code == .poolSaturated { return }
        if attempts.count >= keptAttempts { attempts.remove(at: 1) }
        attempts.append(attempt.record)
    }

    /// Sleeps for `duration`, or less when `withdrawal` is withdrawn meanwhile; false when it was. Throws
    /// when the task is cancelled.
    static func sleep(for duration: Duration, unless withdrawal: SendWithdrawal?) async throws -> Bool {
        guard let withdrawal else {
            try await Task.sleep(for: duration)
            return true
        }
        return try await withdrawal.sleep(for: duration)
    }

    static func withdrawn(_ last: RecordedAttempt?, _ attempts: [DeliveryAttempt], _ when: String) -> DeliveryResult {
        DeliveryResult(
            status: .withdrawn, response: last?.response, attempts: attempts,
            summary: "withdrawn by its sender \(when); not sent")
    }

    /// The result of a push held past `policy.maximumHoldTime`: `waited` so far, and `ahead` the wait it was
    /// about to begin (a Retry-After longer than the limit ends a push before it waits at all).
    func heldPastLimit(
        _ last: RecordedAttempt?, _ attempts: [DeliveryAttempt], waited: Duration, ahead: Duration = .zero,
        policy: RetryPolicy
    ) -> DeliveryResult {
        let limit = "the \(Self.format(policy.maximumHoldTime)) hold limit"
        let summary =
            ahead > .zero
            ? "waited \(Self.format(waited)) for APNs, and a further \(Self.format(ahead)) would pass \(limit)"
            : "waited \(Self.format(waited)) for APNs, past \(limit)"
        return DeliveryResult(
            status: .expired, response: last?.response, attempts: attempts, summary: summary,
            expiryReason: "holdLimitReached")
    }

    static func format(_ duration: Duration) -> String {
        let seconds = duration.seconds
        return seconds < 10 ? "\(Int((seconds * 1000).rounded())) ms" : "\(Int(seconds.rounded())) s"
    }

    func timeToExpiration(of request: APNsRequest) -> Duration? {
        switch request.expiration {
        case .none: return nil
        case .immediately: return .zero
        case .at(let seconds):
            let now = Date().timeIntervalSince1970
            return .milliseconds(Int64((Double(seconds) - now) * 1000))
        }
    }
}
