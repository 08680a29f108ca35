// The retry policy as a pure function: which outcomes retry, how long to wait, and the bounds.

import HTTP2
import TestSupport
import Testing

@testable import APNs

@Suite("Retry policy")
struct RetryPolicyTests {
    /// A generator that always yields the maximum, so jittered delays equal their ceiling.
    struct MaximumGenerator: RandomNumberGenerator {
        mutating func next() -> UInt64 { UInt64.max }
    }

    let policy = RetryPolicy(
        maximumAttempts: 5, maximumTotalTime: .seconds(60),
        backoff: ExponentialBackoff(initial: .milliseconds(200), maximum: .seconds(5)))

    func decide(
        _ outcome: AttemptOutcome, attempts: Int = 1, elapsed: Duration = .zero,
        expiresIn: Duration? = nil, policy: RetryPolicy? = nil
    ) -> RetryDecision {
        var generator = MaximumGenerator()
        return (policy ?? self.policy).decide(
            after: outcome, attempts: attempts, elapsed: elapsed,
            timeToExpiration: expiresIn, using: &generator)
    }

    func response(_ status: Int, _ reason: String?) -> AttemptOutcome {
        .response(APNsResponse(status: status, reason: reason.map { APNsErrorReason($0) }), retryAfter: nil)
    }

    @Test func acceptedIsDelivered() {
        #expect(decide(response(200, nil)) == .finish(.delivered, because: "accepted by APNs"))
    }

    @Test(arguments: ["InvalidProviderToken", "BadCertificate", "BadCertificateEnvironment", "MissingProviderToken"])
    func aRefusedCredentialEndsTheSendWithoutRejectingThePush(reason: String) {
        let status = APNsErrorReason(reason).httpStatus ?? 403
        guard case .finish(.credentialRefused, let because) = decide(response(status, reason)) else {
            Issue.record("\(reason) is about the credential, not the push")
            return
        }
        #expect(because.contains(reason))
    }

    @Test(arguments: [
        "Unregistered", "BadDeviceToken", "ExpiredToken", "DeviceTokenNotForTopic", "BadTopic",
        "PayloadTooLarge", "MissingTopic",
    ])
    func permanentAndInvalidTokenReasonsAreRejectedWithoutRetry(reason: String) {
        let status = APNsErrorReason(reason).httpStatus ?? 400
        guard case .finish(.rejected, let because) = decide(response(status, reason)) else {
            Issue.record("\(reason) should be rejected")
            return
        }
        #expect(because.contains(reason))
    }

    @Test(
        arguments: [
            (429, "TooManyRequests"), (500, "InternalServerError"), (503, "ServiceUnavailable"),
            (429, "TooManyProviderTokenUpdates"), (502, nil),
        ] as [(Int, String?)])
    func serverTroubleRetriesAfterExponentialBackoff(status: Int, reason: String?) {
        #expect(decide(response(status, reason), attempts: 1) == .retry(after: .milliseconds(200), action: .none))
        #expect(decide(response(status, reason), attempts: 3) == .retry(after: .milliseconds(800), action: .none))
        #expect(
            decide(
                response(status, reason), attempts: 4,
                policy: RetryPolicy(
                    maximumAttempts: 9,
                    backoff: ExponentialBackoff(initial: .seconds(1), maximum: .seconds(5))))
                == .retry(after: .seconds(5), action: .none), "the ceiling caps the growth")
    }

    @Test func jitterStaysWithinTheCeiling() {
        var generator = SeededGenerator.replayable("jitterStaysWithinTheCeiling")
        for attempt in 1...4 {
            let ceiling = policy.backoff.ceiling(afterFailures: attempt)
            for _ in 0..<50 {
                let decision = policy.decide(
                    after: response(503, "ServiceUnavailable"), attempts: attempt,
                    elapsed: .zero, timeToExpiration: nil, using: &generator)
                guard case .retry(let delay, _) = decision else {
                    Issue.record("503 should retry")
                    return
                }
                #expect(delay >= .zero && delay <= ceiling)
            }
        }
    }

    @Test func retryAfterIsHonouredAsALowerBound() {
        let outcome = AttemptOutcome.response(
            APNsResponse(status: 429, reason: .tooManyRequests),
            retryAfter: .seconds(7))
        #expect(decide(outcome) == .retry(after: .seconds(7), action: .none))
    }

    @Test func connectionReasonsAreResentUncountedOnANewConnection() {
        for reason in ["IdleTimeout", "Shutdown", "UnrelatedKeyIdInToken"] {
            let status = APNsErrorReason(reason).httpStatus!
            #expect(decide(response(status, reason)) == .resend(action: .useNewConnection))
            // Not an attempt: APNs did not take the push, and the budget does not end it.
            #expect(decide(response(status, reason), attempts: 5) == .resend(action: .useNewConnection))
        }
    }

    @Test func expiredProviderTokenRetriesAtOnceWithANewToken() {
        #expect(decide(response(403, "ExpiredProviderToken")) == .retry(after: .zero, action: .refreshProviderToken))
    }

    @Test func requestsThatNeverReachedAPNsAreResentUncountedAndConnectFailuresBackOff() {
        let unprocessed = HTTP2ClientError(.unprocessed, "GOAWAY", endpoint: "h:1")
        let saturated = HTTP2ClientError(.poolSaturated, "every stream is busy", endpoint: "h:1")
        for error in [unprocessed, saturated] {
            #expect(decide(.transportFailure(error)) == .resend(action: .none))
            // Not an attempt: the budget does not end it, however many attempts were counted before.
            #expect(decide(.transportFailure(error), attempts: 5) == .resend(action: .none))
            guard case .finish(.expired, _) = decide(.transportFailure(error), expiresIn: .milliseconds(-1)) else {
                Issue.record("\(error.code) past the expiration is expired, not resent")
                continue
            }
        }
        let policy = RetryPolicy()
        #expect(policy.resendDelay(afterResends: 1) == .zero, "the first resend goes at once")
        for resends in 2...30 {
            #expect(policy.resendDelay(afterResends: resends) <= .seconds(1), "resends are spaced, at most 1 s apart")
        }
        let refused = HTTP2ClientError(.connectFailed, "refused", endpoint: "h:1", retryAfter: .seconds(2))
        #expect(
            decide(.transportFailure(refused)) == .retry(after: .seconds(2), action: .none),
            "the pool's back-off is a lower bound")
    }

    @Test func possiblyProcessedRequestsRetryOnlyWhenAllowed() {
        let timeout = HTTP2ClientError(.requestTimeout, "no response", endpoint: "h:1")
        #expect(decide(.transportFailure(timeout)) == .retry(after: .milliseconds(200), action: .none))
        let cautious = RetryPolicy(maximumAttempts: 5, retriesPossiblyProcessedRequests: false)
        guard case .finish(.failed, let because) = decide(.transportFailure(timeout), policy: cautious) else {
            Issue.record("a cautious policy must not resend a request APNs may have processed")
            return
        }
        #expect(because.contains("may have processed"))
    }

    @Test func failuresOfThePathToAPNsBackOff() {
        // A certificate that does not verify or a peer without h2 can be a proxy or a DNS fault that passes;
        // the pool's breaker holds the pushes meanwhile.
        for code in [HTTP2ClientError.Code.certificateVerificationFailed, .http2NotNegotiated] {
            let error = HTTP2ClientError(code, "broken", endpoint: "h:1")
            #expect(decide(.transportFailure(error)) == .retry(after: .milliseconds(200), action: .none))
        }
    }

    @Test func configurationFailuresAreNotRetried() {
        for code in [HTTP2ClientError.Code.poolShutDown, .invalidConfiguration, .responseTooLarge] {
            let error = HTTP2ClientError(code, "broken", endpoint: "h:1")
            guard case .finish(.failed, _) = decide(.transportFailure(error)) else {
                Issue.record("\(code) should fail at once")
                continue
            }
        }
        guard case .finish(.rejected, _) = decide(.invalidRequest("payload too large")) else {
            Issue.record("an invalid request is rejected")
            return
        }
    }

    @Test func attemptsAreBounded() {
        guard case .finish(.failed, let because) = decide(response(503, "ServiceUnavailable"), attempts: 5) else {
            Issue.record("the fifth failure ends it")
            return
        }
        #expect(because.contains("5 attempts"))
        #expect(because.contains("ServiceUnavailable"))
    }

    @Test func totalTimeIsBounded() {
        let late = decide(response(503, "ServiceUnavailable"), attempts: 2, elapsed: .milliseconds(59_700))
        guard case .finish(.failed, let because) = late else {
            Issue.record("a retry past the total time must not be scheduled")
            return
        }
        #expect(because.contains("60 s"))
    }

    @Test func expirationBoundsRetries() {
        guard case .finish(.expired, _) = decide(response(503, "ServiceUnavailable"), expiresIn: .milliseconds(100))
        else {
            Issue.record("a retry at or after the expiration must not be scheduled")
            return
        }
        #expect(
            decide(response(503, "ServiceUnavailable"), expiresIn: .seconds(10))
                == .retry(after: .milliseconds(200), action: .none))
        // Expiration 0: only immediate retries.
        guard case .finish(.expired, _) = decide(response(503, "ServiceUnavailable"), expiresIn: .zero) else {
            Issue.record("expiration 0 allows no delayed retry")
            return
        }
        #expect(decide(response(400, "IdleTimeout"), expiresIn: .zero) == .resend(action: .useNewConnection))
        // Already expired: nothing more.
        guard case .finish(.expired, let because) = decide(response(400, "IdleTimeout"), expiresIn: .seconds(-1)) else {
            Issue.record("an expired notification is not retried")
            return
        }
        #expect(because.contains("expired"))
    }

    @Test func neverSendsOnce() {
        guard case .finish(.failed, _) = decide(response(503, "ServiceUnavailable"), policy: .never) else {
            Issue.record("RetryPolicy.never does not retry")
            return
        }
    }
}

@Suite("Retry-After and endpoint URLs")
struct RetryHelpersTests {
    @Test func retryAfterSecondsAndHTTPDates() {
        #expect(RetryAfter.delay("120", now: 0) == .seconds(120))
        #expect(RetryAfter.delay(" 5 ", now: 0) == .seconds(5))
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_700) == .seconds(77))
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_800) == .zero, "a past date")
        #expect(RetryAfter.delay("-3", now: 0) == nil)
        #expect(RetryAfter.delay("soon", now: 0) == nil)
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 25:49:37 GMT", now: 0) == nil)
    }

    @Test func endpointURLsAreParsedOrRefusedClearly() throws {
        #expect(
            try ConnectionPool.Configuration.parse(url: "https://api.push.apple.com")
                == ("api.push.apple.com", 443))
        #expect(try ConnectionPool.Configuration.parse(url: "https://127.0.0.1:8443/") == ("127.0.0.1", 8443))
        #expect(try ConnectionPool.Configuration.parse(url: "https://[::1]:2197") == ("::1", 2197))
        for bad in ["http://a", "https://", "https://a:0", "https://a:x", "https://a/3/device", "https://u@a"] {
            let error = #expect(throws: HTTP2ClientError.self) { try ConnectionPool.Configuration.parse(url: bad) }
            #expect(error?.message.contains("https://host[:port]") == true, "\(bad)")
        }
    }
}
