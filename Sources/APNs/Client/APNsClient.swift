// Sends APNs requests over pooled HTTP/2 connections with one credential: one pool per environment,
// provider tokens from a shared signer (or mutual TLS), and the retry loop that records every attempt.

import Foundation
public import HTTP2
import Platform

/// How a client proves who it is to APNs.
public enum APNsCredential: Sendable {
    /// Token authentication: `authorization: bearer <JWT>` from this signer on every request.
    case token(ProviderTokenSigner)
    /// Certificate authentication: mutual TLS with this identity; no authorization header.
    case certificate(CertificateIdentity)
}

/// An APNs client for one credential.
///
/// - Important: thread-safe; share one client per credential across the process. Call `shutdown()`
///   when done.
public final class APNsClient: Sendable {
    /// Where and how the client connects.
    public struct Configuration: Sendable {
        public var credential: APNsCredential
        /// Connect here instead of Apple's host for the request's environment, e.g.
        /// `https://127.0.0.1:8443` for the simulator or a test server. Default: nil (Apple).
        public var endpointOverride: String?
        /// Apple's port: 443 (default) or 2197.
        public var port: Int = APNsEnvironment.port
        /// Reach APNs through this HTTP proxy (a CONNECT tunnel). Default: nil (direct).
        public var proxy: HTTPProxy?
        /// Default: the system trust store; a CA file only for test servers.
        public var trustRoots: TLSConfiguration.TrustRoots = .systemDefault
        /// Connections per environment. Default: 2.
        public var connectionsPerEnvironment: Int = 2
        /// A pool opens more connections, up to this many, while requests wait for a stream. Default: nil
        /// (exactly `connectionsPerEnvironment`).
        public var maximumConnectionsPerEnvironment: Int?
        /// Our cap on streams per connection on top of APNs' SETTINGS. Default: 1000.
        public var maximumConcurrentStreamsPerConnection: Int = 1000
        /// Requests that may wait for a stream per environment. Default: 10,000.
        public var maximumQueuedRequests: Int = 10_000
        /// One attempt, from send to response (queueing included). Default: 30 s.
        public var requestTimeout: Duration = .seconds(30)
        /// TCP + TLS + first SETTINGS. Default: 10 s.
        public var connectTimeout: Duration = .seconds(10)
        /// Idle time before a PING. Default: 60 s.
        public var pingInterval: Duration = .seconds(60)
        /// Delay between failed connection attempts. Default: 100 ms doubling to 30 s, full jitter.
        public var reconnectBackoff = ExponentialBackoff(initial: .milliseconds(100), maximum: .seconds(30))
        /// When each environment's pool counts as down, and how it is probed.
        public var breaker = CircuitBreaker.Configuration()
        /// How pushes to a device APNs answered 429 TooManyRequests for are paced.
        public var deviceThrottle = DeviceThrottle.Configuration()
        /// Once APNs refuses the credential, the time between the pushes that ask it again (the others are
        /// settled `credentialRefused` unsent). Default: 1 s doubling to 5 s with each probe refused: a credential
        /// APNs takes again is in use within 5 s (and its parked records once their park delay has passed), at
        /// one refused request per pool every 5 s meanwhile.
        public var credentialProbeInterval = ExponentialBackoff(initial: .seconds(1), maximum: .seconds(5))
        /// Told when an environment's breaker opens, half-opens or closes (for logs, metrics, readiness).
        public var onBreakerTransition: (@Sendable (APNsEnvironment, CircuitBreaker.Transition) -> Void)?
        /// Told about every attempt once, when it ends: answered, failed, or refused before it was sent.
        /// Metrics count attempts here, as they happen, rather than when a push's retries are all done.
        /// Default: nil.
        ///
        /// - Important: called on the thread that ended the attempt (an I/O loop, or the sender's);
        ///   it must be quick and must not block.
        public var attemptObserver: (@Sendable (APNsRequest, DeliveryAttempt) -> Void)?

        public init(credential: APNsCredential) {
            self.credential = credential
        }

        /// The pool configuration for one environment.
        public func poolConfiguration(for environment: APNsEnvironment) throws(HTTP2ClientError)
            -> ConnectionPool.Configuration
        {
            var tls = TLSConfiguration(trustRoots: trustRoots)
            if case .certificate(let identity) = credential {
                tls.installClientIdentity = { context in try identity.install(into: context) }
            }
            var pool: ConnectionPool.Configuration
            if let endpointOverride {
                pool = try ConnectionPool.Configuration(url: endpointOverride, tls: tls)
            } else {
                pool = ConnectionPool.Configuration(host: environment.host, port: port, tls: tls)
            }
            pool.proxy = proxy
            pool.connectionCount = connectionsPerEnvironment
            pool.maximumConnectionCount = maximumConnectionsPerEnvironment
            pool.maximumConcurrentStreamsPerConnection = maximumConcurrentStreamsPerConnection
            pool.maximumQueuedRequests = maximumQueuedRequests
            pool.requestTimeout = requestTimeout
            pool.connectTimeout = connectTimeout
            pool.pingInterval = pingInterval
            pool.reconnectBackoff = reconnectBackoff
            return pool
        }
    }

    public let configuration: Configuration
    private let group: EventLoopGroup
    private let sandboxPool: ConnectionPool
    private let productionPool: ConnectionPool
    private let sandboxBreaker: CircuitBreaker
    private let productionBreaker: CircuitBreaker
    private let sandboxCredentialGate: CredentialGate
    private let productionCredentialGate: CredentialGate
    /// Paces the devices APNs throttled (429 TooManyRequests), in both environments.
    public let deviceThrottle: DeviceThrottle
    let signer: ProviderTokenSigner?

    /// Checks the configuration for both environments (endpoint, CA file, client identity); connects
    /// only on the first send.
    public init(configuration: Configuration, group: EventLoopGroup = .shared) throws(HTTP2ClientError) {
        self.configuration = configuration
        self.group = group
        if case .token(let signer) = configuration.credential { self.signer = signer } else { self.signer = nil }
        sandboxPool = try ConnectionPool(configuration: configuration.poolConfiguration(for: .sandbox), group: group)
        productionPool = try ConnectionPool(
            configuration: configuration.poolConfiguration(for: .production),
            group: group)
        let onTransition = configuration.onBreakerTransition
        sandboxBreaker = CircuitBreaker(configuration: configuration.breaker) { onTransition?(.sandbox, $0) }
        productionBreaker = CircuitBreaker(configuration: configuration.breaker) { onTransition?(.production, $0) }
        deviceThrottle = DeviceThrottle(configuration: configuration.deviceThrottle)
        sandboxCredentialGate = CredentialGate(probeInterval: configuration.credentialProbeInterval)
        productionCredentialGate = CredentialGate(probeInterval: configuration.credentialProbeInterval)
    }

    /// The credential gate of the pool serving `environment`.
    public func credentialGate(for environment: APNsEnvironment) -> CredentialGate {
        environment == .sandbox ? sandboxCredentialGate : productionCredentialGate
    }

    /// The circuit breaker of the pool serving `environment`.
    public func breaker(for environment: APNsEnvironment) -> CircuitBreaker {
        environment == .sandbox ? sandboxBreaker : productionBreaker
    }

    /// The pool serving `environment` (for statistics).
    public func pool(for environment: APNsEnvironment) -> ConnectionPool {
        environment == .sandbox ? sandboxPool : productionPool
    }

    /// Sends one attempt of `request` and returns APNs' answer, whatever its status.
    ///
    /// - Throws: `APNsInvalidRequest` when the request breaks APNs' rules (nothing is sent),
    ///   `CredentialError` when no provider token can be made, `HTTP2ClientError` when the transport
    ///   fails, `CancellationError`.
    public func send(_ request: APNsRequest) async throws -> APNsResponse {
        let (http, _) = try prepare(request)
        return interpret(try await pool(for: request.environment).send(http)).response
    }

    /// The HTTP/2 request for `request`, with the provider token it carries. Synchronous, so that a send
    /// costs one async call into the pool and no more.
    func prepare(_ request: APNsRequest) throws -> (HTTP2Request, ProviderToken?) {
        let token = try signer?.token()
        let problems = request.validate()
        if !problems.isEmpty { throw APNsInvalidRequest(problems: problems) }
        // The pool's authority: the host actually connected to (Apple's, or an override).
        let http = request.http2Request(
            authorizationValue: token?.authorizationHeaderValue,
            authority: pool(for: request.environment).authority)
        return (http, token)
    }

    /// APNs' answer in an HTTP/2 response, and the delay its Retry-After asks for.
    func interpret(_ response: HTTP2Response) -> (response: APNsResponse, retryAfter: Duration?) {
        if response.status == 200 {
            // The common case, read without the general parser (which lowercases every header name).
            var accepted = APNsResponse(status: 200)
            accepted.apnsID = response.headerFields.withFirstValue(named: "apns-id") { APNsID.parse(bytes: $0) } ?? nil
            if accepted.apnsID == nil {  // a broadcast's id comes back in apns-request-id
                accepted.apnsID =
                    response.headerFields.withFirstValue(named: "apns-request-id") { APNsID.parse(bytes: $0) } ?? nil
            }
            accepted.uniqueID = response.headerFields.withFirstValue(named: "apns-unique-id") {
                APNsUniqueID(bytes: $0)
            }
            return (accepted, nil)
        }
        let parsed = APNsResponse(
            status: response.status,
            headers: response.headerFields.lazy.map { APNsHeaderField($0.name, $0.value) }, body: response.body)
        let retryAfter = response.header("retry-after").flatMap {
            RetryAfter.delay($0, now: Int64(Date().timeIntervalSince1970))
        }
        return (parsed, retryAfter)
    }

    /// Sends `request`, retrying as `policy` says with a fresh apns-id on every attempt, and reports
    /// every attempt. Never throws: failures end up in the result.
    ///
    /// The first attempt uses `request.apnsID`. ExpiredProviderToken makes the signer refresh;
    /// IdleTimeout, Shutdown and UnrelatedKeyIdInToken retire the connection that answered.
    ///
    /// - Important: runs on the caller's executor (`nonisolated(nonsending)`). Senders that run on
    ///   `EventLoopGroup.taskExecutor()` render, submit and resume on the I/O thread with no hand-off.
    /// A send still waiting when `withdrawal` is withdrawn ends `withdrawn`, unsent (`SendWithdrawal`).
    nonisolated(nonsending)
        public func send(
            _ request: APNsRequest, policy: RetryPolicy, withdrawal: SendWithdrawal? = nil
        ) async -> DeliveryResult
    {
        let clock = ContinuousClock()
        let firstStart = clock.now
        // While the pool's breaker holds, or APNs throttles the device, the first attempt waits in the
        // retry loop like any other.
        let sendsNow =
            breaker(for: request.environment).isClosed && !isPaced(request) && withdrawal?.isWithdrawn != true
        var credentialProbe = false
        if sendsNow {
            switch credentialGate(for: request.environment).admitFirstAttempt() {
            case .send: break
            case .probe: credentialProbe = true
            case .refused:
                if let heldBack = credentialGate(for: request.environment).heldBack() { return heldBack }
            }
        }
        let first =
            sendsNow
            ? await attemptOnce(
                request, clock: clock, start: firstStart, probe: false, credentialProbe: credentialProbe)
            : nil
        return await finishSend(
            SendInProgress(client: self, request: request, first: first, firstStart: firstStart), policy: policy,
            withdrawal: withdrawal)
    }

    /// A send whose first attempt has ended (`beginSend`); `finishSend` takes it from there.
    ///
    /// A class, not a struct: it is handed from the loop that saw the response to the waiting event and
    /// on to the retries, and a reference moves with one retain where the request and the attempt's
    /// fields would each be retained at every hand-over.
    ///
    /// It is also what the first attempt's response handler captures while the request is in flight:
    /// one reference, where capturing the request and the attempt copied both into the closure's
    /// context (a retain per string of each) and again into this object.
    public final class SendInProgress: @unchecked Sendable {
        /// The client that sent the first attempt, which `settledResult` and `finishSend` go on with.
        public let client: APNsClient
        let request: APNsRequest
        /// Nil when nothing was sent yet: the pool's breaker was holding its pushes. Written before the
        /// object is handed to `beginSend`'s receiver, and after only by `settledResult`, which takes a
        /// delivered attempt out as the send's last reader.
        fileprivate(set) var first: RecordedAttempt?
        let firstStart: ContinuousClock.Instant
        /// Told when the first attempt has ended, with `slot`.
        fileprivate let receiver: (any FirstAttemptReceiver)?
        /// The receiver's number for this send (its index among the sends it waits for).
        public let slot: Int
        /// The provider token the first attempt carried, for ExpiredProviderToken.
        fileprivate var token: ProviderToken?
        /// The first attempt is the one that asks APNs again about a credential it refused.
        fileprivate var isCredentialProbe = false
        /// Nothing was sent: APNs refuses the credential (`CredentialGate`), and `settledResult` says so.
        fileprivate var heldBackByCredentialGate = false

        init(
            client: APNsClient, request: APNsRequest, first: RecordedAttempt?, firstStart: ContinuousClock.Instant,
            receiver: (any FirstAttemptReceiver)? = nil, slot: Int = 0
        ) {
            self.client = client
            self.request = request
            self.first = first
            self.firstStart = firstStart
            self.receiver = receiver
            self.slot = slot
        }

        /// True when APNs accepted the first attempt: `finishSend` then returns at once.
        public var isDelivered: Bool { first?.record.httpStatus == 200 && first?.response != nil }

        /// The response handler of the first attempt: a method of this object, so that the closure handed
        /// to the pool captures this one reference and needs no context of its own.
        fileprivate func firstAttemptEnded(_ result: Result<HTTP2Response, any Error>) {
            // Moved out and back in: mutated in place, never copied.
            var attempt = first.take()!
            switch result {
            case .success(let response): client.record(response, token: token, in: &attempt)
            case .failure(let error): APNsClient.record(error, in: &attempt)
            }
            token = nil
            attempt.record.latency = firstStart.duration(to: ContinuousClock.now)
            client.attemptEnded(request, attempt, probe: false, credentialProbe: isCredentialProbe)
            first = consume attempt
            receiver?.firstAttemptEnded(self)
        }
    }

    /// Sends the first attempt of `request` now and tells `receiver` once it has ended, on the
    /// connection's loop thread (or before returning, when it fails at once), with `slot`. `finishSend`
    /// then makes the result, retrying as the policy says.
    ///
    /// `send(_:policy:)` in two halves, for callers that send many notifications and wait once for all
    /// their first attempts (a worker's event with several devices): no task, continuation or
    /// cancellation handler per notification, and no closure either: a receiver object and a slot
    /// number, where a closure per push capturing its waiter, client and slot cost an allocation each.
    /// The first attempt is not cancellable; it ends with its response or the request timeout.
    public func beginSend(_ request: consuming APNsRequest, slot: Int, to receiver: any FirstAttemptReceiver) {
        let firstStart = ContinuousClock.now
        guard breaker(for: request.environment).isClosed && !isPaced(request) else {
            receiver.firstAttemptEnded(
                SendInProgress(
                    client: self, request: request, first: nil, firstStart: firstStart, receiver: receiver,
                    slot: slot))
            return
        }
        var credentialProbe = false
        switch credentialGate(for: request.environment).admitFirstAttempt() {
        case .send: break
        case .probe: credentialProbe = true
        case .refused:
            let heldBack = SendInProgress(
                client: self, request: request, first: nil, firstStart: firstStart, receiver: receiver, slot: slot)
            heldBack.heldBackByCredentialGate = true
            receiver.firstAttemptEnded(heldBack)
            return
        }
        // Everything that reads the request does so before it moves into the send: read back from the
        // object, it was copied for every call.
        var first = Self.newAttempt(request)
        let prepared: (http: HTTP2Request, token: ProviderToken?)?
        do {
            prepared = try prepare(request)
        } catch {
            Self.record(error, in: &first)
            first.record.latency = firstStart.duration(to: ContinuousClock.now)
            observe(request, first)
            prepared = nil
        }
        let pool = pool(for: request.environment)
        let progress = SendInProgress(
            client: self, request: consume request, first: consume first, firstStart: firstStart, receiver: receiver,
            slot: slot)
        progress.isCredentialProbe = credentialProbe
        guard let prepared else {
            if credentialProbe { credentialGate(for: progress.request.environment).record(.cancelled, probe: true) }
            receiver.firstAttemptEnded(progress)
            return
        }
        progress.token = prepared.token
        pool.start(prepared.http, onResponse: progress.firstAttemptEnded)
    }

    /// The result of a send begun with `beginSend`: at once when its first attempt settled it (accepted,
    /// or refused in a way the policy does not retry), else after the policy's retries, each with a fresh
    /// apns-id. A retry still waiting when `withdrawal` is withdrawn ends `withdrawn`, unsent.
    nonisolated(nonsending)
        public func finishSend(
            _ progress: SendInProgress, policy: RetryPolicy, withdrawal: SendWithdrawal? = nil
        ) async -> DeliveryResult
    {
        if let settled = settledResult(progress, policy: policy) { return settled }
        return await retry(
            progress.request, policy: policy, after: progress.first, firstStart: progress.firstStart,
            clock: ContinuousClock(), withdrawal: withdrawal)
    }

    /// The result when the first attempt settled the send: accepted, or refused in a way `policy` does not
    /// retry (an unregistered token, a bad topic...). Nil when the policy retries: `finishSend` then does.
    public func settledResult(_ progress: SendInProgress, policy: RetryPolicy) -> DeliveryResult? {
        if progress.isDelivered {
            // The send ends here: its attempt is moved out of it, not copied (a retain and a release for
            // every field of the attempt, its response and its outcome).
            var first = progress.first.take()!
            return DeliveryResult(
                status: .delivered, response: first.response.take()!, attempts: [first.record],
                summary: "accepted by APNs")
        }
        if progress.heldBackByCredentialGate,
            let heldBack = credentialGate(for: progress.request.environment).heldBack()
        {
            return heldBack
        }
        guard let first = progress.first else { return nil }
        if isHeldByBreaker(first, environment: progress.request.environment) { return nil }
        let decision = policy.decide(
            after: first.outcome, attempts: 1,
            elapsed: progress.firstStart.duration(to: .now), timeToExpiration: timeToExpiration(of: progress.request))
        guard case .finish(let status, let because) = decision else { return nil }
        return DeliveryResult(status: status, response: first.response, attempts: [first.record], summary: because)
    }

    /// Closes both environments' pools, letting open streams finish for up to `gracePeriod`.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        await sandboxPool.shutdown(gracePeriod: gracePeriod)
        await productionPool.shutdown(gracePeriod: gracePeriod)
    }
}

/// What waits for first attempts begun with ``APNsClient/beginSend(_:slot:to:)``: told once per send,
/// with the send's slot, when its first attempt has ended.
///
/// - Important: called on the loop thread that saw the response (or on the sender's, when the attempt
///   ends before anything is sent); it must be quick and must not block.
public protocol FirstAttemptReceiver: AnyObject, Sendable {
    func firstAttemptEnded(_ progress: APNsClient.SendInProgress)
}
