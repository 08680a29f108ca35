// When a notification is sent again, and after how long: a pure decision from the last attempt's outcome,
// kept apart from the transport so it can be tested and tuned alone.

public import HTTP2

/// What one attempt came to, as the retry policy sees it.
public enum AttemptOutcome: Sendable {
    /// APNs answered (any status).
    case response(APNsResponse, retryAfter: Duration?)
    /// The HTTP/2 transport failed.
    case transportFailure(HTTP2ClientError)
    /// No provider token could be made.
    case credentialFailure(String)
    /// The request breaks APNs' rules and was not sent.
    case invalidRequest(String)
    /// The caller's task was cancelled.
    case cancelled
}

/// What to do before the next attempt.
public enum RetryAction: Sendable, Hashable {
    /// Nothing special.
    case none
    /// Stop using the connection that answered (APNs: IdleTimeout, Shutdown, UnrelatedKeyIdInToken).
    case useNewConnection
    /// Sign a new provider token (APNs: ExpiredProviderToken).
    case refreshProviderToken
}

/// The policy's verdict after an attempt.
public enum RetryDecision: Sendable, Hashable {
    /// Stop with this status; `because` explains it.
    case finish(DeliveryStatus, because: String)
    /// Try again after `delay`, doing `action` first.
    case retry(after: Duration, action: RetryAction)
    /// Send again without counting an attempt, doing `action` first: APNs did not process the request
    /// (a stream the server did not process, a connection APNs was closing or had left idle too long), or
    /// the worker's own pool had no room for it. Nothing was said about the push. The sender spaces
    /// resends with `resendBackoff`, so a storm of GOAWAYs or of Shutdown answers never turns into a hot
    /// loop.
    case resend(action: RetryAction)
}

/// Which outcomes are retried and when.
///
/// Retried, after exponential back-off with full jitter (and never sooner than `Retry-After`):
/// 429, 500, 503 ServiceUnavailable, unknown 5xx, lost connections, timeouts and stream resets, failed
/// connects, TLS handshakes and certificate checks. Retried at once: ExpiredProviderToken (with a new
/// token). Resent without counting an attempt: streams the server did not process (GOAWAY,
/// REFUSED_STREAM, never written), requests the pool had no room for, and IdleTimeout / Shutdown /
/// UnrelatedKeyIdInToken (on a new connection). Never retried: invalid tokens, bad credentials, permanent
/// request errors. Every retry gets a fresh apns-id (the client does that).
///
/// Bounds: at most `maximumAttempts`, no retry that would start after `maximumTotalTime` from the first
/// attempt, and none at or after the notification's `apns-expiration` (the push is then `expired`). An
/// expiration of 0 ("try once, do not store") allows only the immediate retries. Time a push spends
/// waiting for its pool's circuit breaker counts against neither bound, only against `maximumHoldTime`.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included. Default: 5.
    public var maximumAttempts: Int
    /// No retry starts later than this after the first attempt started. Default: 60 s.
    public var maximumTotalTime: Duration
    /// Delay before retry n (1-based failures). Default: 200 ms doubling to 30 s, full jitter.
    public var backoff: ExponentialBackoff
    /// Whether a request that may have reached APNs (timeout, lost connection, stream reset) is sent
    /// again, at the risk of a duplicate on the device. Default: true (at-least-once).
    public var retriesPossiblyProcessedRequests: Bool
    /// The longest a push waits in all for APNs to take it: while its pool's breaker is open (APNs or the
    /// path to it is down), while its retries are excused in a degraded pool, while it is resent without
    /// being attempted, and while its device is paced; it is `expired` after that (`holdLimitReached`),
    /// or at its own expiration when that comes first. Default: 1 hour.
    public var maximumHoldTime: Duration
    /// Delay before resend n of a push that never reached APNs (1-based, counted since its last real
    /// attempt): the first goes at once. Default: 10 ms doubling to 1 s, full jitter.
    public var resendBackoff: ExponentialBackoff

    public init(
        maximumAttempts: Int = 5, maximumTotalTime: Duration = .seconds(60),
        backoff: ExponentialBackoff = ExponentialBackoff(initial: .milliseconds(200), maximum: .seconds(30)),
        retriesPossiblyProcessedRequests: Bool = true, maximumHoldTime: Duration = .seconds(3600),
        resendBackoff: ExponentialBackoff = ExponentialBackoff(
            initial: .milliseconds(10),
            maximum: .seconds(1))
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.maximumTotalTime = maximumTotalTime
        self.backoff = backoff
        self.retriesPossiblyProcessedRequests = retriesPossiblyProcessedRequests
        self.maximumHoldTime = maximumHoldTime
        self.resendBackoff = resendBackoff
    }

    /// The delay before the `resends`th resend in a row (1-based): none for the first.
    public func resendDelay(afterResends resends: Int) -> Duration {
        resends <= 1 ? .zero : resendBackoff.delay(afterFailures: resends - 1)
    }

    /// Sends each notification once.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// The decision after attempt number `attempts` (1 = the first) ended with `outcome`.
    ///
    /// - Parameters:
    ///   - elapsed: time since the first attempt started.
    ///   - timeToExpiration: time left until the notification's apns-expiration; nil when it has none,
    ///     `.zero` for an expiration of 0 (immediate retries only), negative once it has passed.
    public func decide(
        after outcome: AttemptOutcome, attempts: Int, elapsed: Duration,
        timeToExpiration: Duration?
    ) -> RetryDecision {
        var generator = SystemRandomNumberGenerator()
        return decide(
            after: outcome, attempts: attempts, elapsed: elapsed, timeToExpiration: timeToExpiration,
            using: &generator)
    }

    public func decide(
        after outcome: AttemptOutcome, attempts: Int, elapsed: Duration, timeToExpiration: Duration?,
        using generator: inout some RandomNumberGenerator
    ) -> RetryDecision {
        let kind: RetryKind
        let what: String
        switch outcome {
        case .response(let response, let retryAfter):
            if response.isAccepted { return .finish(.delivered, because: "accepted by APNs") }
            what = "\(response.status) \(response.reason?.rawValue ?? "(no reason)")"
            switch response.reasonClass ?? .permanent {
            case .retryWithBackoff: kind = .backoff(minimum: retryAfter)
            case .retryOnNewConnection:
                // IdleTimeout, Shutdown, UnrelatedKeyIdInToken: about the connection, not the push, which
                // APNs did not take. Counted, a push that met front ends shutting down one after another
                // five times ended failed.
                return Self.resend(.useNewConnection, last: what, timeToExpiration: timeToExpiration)
            case .refreshProviderToken: kind = .immediate(.refreshProviderToken)
            case .invalidToken: return .finish(.rejected, because: "\(what): the device token is no longer valid")
            case .badCredential:
                return .finish(.credentialRefused, because: "\(what): APNs refused the credential, not this push")
            case .permanent: return .finish(.rejected, because: "\(what): APNs refused the request")
            }
        case .transportFailure(let error):
            what = "\(error.code): \(error.message)"
            switch error.code {
            case .unprocessed, .poolSaturated:
                return Self.resend(.none, last: what, timeToExpiration: timeToExpiration)
            case .connectFailed, .connectTimeout, .tlsHandshakeFailed, .protocolError,
                .certificateVerificationFailed, .http2NotNegotiated, .proxyUnreachable, .proxyAuthenticationRequired,
                .proxyCredentialsRefused, .proxyForbidden, .proxyRefused:
                kind = .backoff(minimum: error.retryAfter)
            case .connectionClosed, .requestTimeout, .streamReset:
                guard retriesPossiblyProcessedRequests else {
                    return .finish(.failed, because: "\(what) (not retried: APNs may have processed it)")
                }
                kind = .backoff(minimum: nil)
            default:
                return .finish(.failed, because: what)
            }
        case .credentialFailure(let message):
            return .finish(.failed, because: "no provider token: \(message)")
        case .invalidRequest(let message):
            return .finish(.rejected, because: "invalid request: \(message)")
        case .cancelled:
            return .finish(.failed, because: "cancelled")
        }

        if attempts >= maximumAttempts {
            return .finish(.failed, because: "gave up after \(attempts) attempts; last: \(what)")
        }
        let delay: Duration
        let action: RetryAction
        switch kind {
        case .immediate(let immediateAction):
            delay = .zero
            action = immediateAction
        case .backoff(let minimum):
            delay = max(backoff.delay(afterFailures: attempts, using: &generator), minimum ?? .zero)
            action = .none
        }
        if elapsed + delay > maximumTotalTime {
            return .finish(
                .failed,
                because: "gave up: a retry in \(Self.format(delay)) would pass the "
                    + "\(Self.format(maximumTotalTime)) limit; last: \(what)")
        }
        if let expiry = Self.expiry(before: delay, timeToExpiration: timeToExpiration, waitingFor: "a retry in") {
            return .finish(.expired, because: "\(expiry); last: \(what)")
        }
        return .retry(after: delay, action: action)
    }

    /// A resend of a request APNs did not take, unless the notification has expired meanwhile.
    private static func resend(_ action: RetryAction, last what: String, timeToExpiration: Duration?) -> RetryDecision {
        if let timeToExpiration, timeToExpiration < .zero {
            return .finish(.expired, because: "expired before it could be sent; last: \(what)")
        }
        return .resend(action: action)
    }

    /// Why a push that would next be sent after `wait` should end `expired` instead, or nil when it still
    /// matters then: it has expired already, or expires before the wait is over (Apple would drop it on
    /// arrival). The one rule for every wait of the retry loop, whatever the wait is for (`waitingFor`
    /// names it in the reason: "a retry in", "APNs' Retry-After of").
    static func expiry(before wait: Duration, timeToExpiration: Duration?, waitingFor: String) -> String? {
        guard let timeToExpiration else { return nil }
        if timeToExpiration < .zero { return "the notification has expired" }
        if wait > .zero, wait >= timeToExpiration {
            return "the notification expires before \(waitingFor) \(format(wait))"
        }
        return nil
    }

    private enum RetryKind {
        case immediate(RetryAction)
        case backoff(minimum: Duration?)
    }

    private static func format(_ duration: Duration) -> String {
        let milliseconds = Int((duration.seconds * 1000).rounded())
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
