// APNsClient end to end against the APNs simulator: responses parsed, retries with fresh apns-ids,
// Retry-After, GOAWAY hand-back, token refresh, new connections. The simulator's scripted faults stand
// in for APNs' failures; its own checks (token signature and age, device states, topics) answer the rest.

import APNsSimulator
import Foundation
import HTTP2
import JSON
import Synchronization
import TestSupport
import Testing

@testable import APNs

@Suite("APNs client against the simulator", .serialized)
struct ClientSendTests {
    static let group = EventLoopGroup(threadCount: 1)
    static let token = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"

    let key: ProviderTokenKey

    init() throws {
        key = try ProviderTokenKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
    }

    /// A started simulator that checks this suite's provider tokens.
    func makeSimulator(maximumTokenAge: Int = 3600, _ adjust: (inout SimulatorConfiguration) -> Void = { _ in })
        throws -> APNsSimulator
    {
        var configuration = SimulatorConfiguration()
        configuration.authentication = .providerToken(
            keys: [SimulatorProviderKey(keyID: key.keyID, publicKeyPEM: key.publicKeyPEM, teamID: key.teamID)],
            maximumAgeSeconds: maximumTokenAge)
        adjust(&configuration)
        let simulator = try APNsSimulator(configuration)
        try simulator.start()
        return simulator
    }

    /// A simulator whose first requests get these failures, in order.
    func makeSimulator(failingFirst failures: [InjectedFailure]) throws -> APNsSimulator {
        try makeSimulator { configuration in
            configuration.faults.script = failures.enumerated().map { ScriptedFault(.request($0 + 1), .fail($1)) }
        }
    }

    func makeClient(
        _ simulator: APNsSimulator, signer: ProviderTokenSigner? = nil,
        _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClient.Configuration(credential: .token(try signer ?? ProviderTokenSigner(key: key)))
        configuration.endpointOverride = simulator.baseURL
        configuration.trustRoots = .caFile(simulator.caFilePath)
        configuration.connectionsPerEnvironment = 1
        configuration.requestTimeout = .seconds(5)
        adjust(&configuration)
        return try APNsClient(configuration: configuration, group: Self.group)
    }

    func request(payload: JSONValue = ["aps": ["alert": "hi"]]) throws -> APNsRequest {
        APNsRequest(
            deviceToken: try DeviceToken(Self.token), environment: .sandbox, topic: "com.example.app",
            payload: payload)
    }

    static let fastRetries = RetryPolicy(
        maximumAttempts: 4, maximumTotalTime: .seconds(10),
        backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(20)))

    static var wallClockSeconds: Int64 { Int64(Date().timeIntervalSince1970) }

    @Test func deliveredResponseCarriesTheIDsAndARealProviderToken() async throws {
        let simulator = try makeSimulator()
        let client = try makeClient(simulator)
        let notification = try request()
        let result = await client.send(notification, policy: .never)
        #expect(result.status == .delivered)
        #expect(result.response?.apnsID == notification.apnsID)
        #expect(result.attempts.count == 1)
        #expect(result.attempts[0].httpStatus == 200)
        #expect(result.attempts[0].latency > .zero)
        let accepted = try #require(simulator.accepted.first)
        #expect(result.response?.apnsUniqueID == accepted.uniqueID && accepted.uniqueID != nil)
        #expect(accepted.deviceToken == Self.token)
        #expect(accepted.apnsID.lowercased() == notification.apnsID.string.lowercased())
        #expect(accepted.header("apns-topic") == "com.example.app")
        #expect(accepted.header("apns-push-type") == "alert")
        #expect(String(decoding: accepted.payload, as: UTF8.self) == #"{"aps":{"alert":"hi"}}"#)
        #expect(accepted.keyID == key.keyID, "the simulator verified the provider token's signature")
        await client.shutdown()
        simulator.stop()
    }

    @Test func unregisteredTokenIsRejectedWithItsTimestamp() async throws {
        let simulator = try makeSimulator { $0.devices.unregistered = [Self.token: 1_700_000_000_000] }
        let client = try makeClient(simulator)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.response?.reason == .unregistered)
        #expect(result.response?.timestampMilliseconds == 1_700_000_000_000)
        #expect(result.reasonClass == .invalidToken)
        #expect(result.attempts.count == 1, "an invalid token is never retried")
        #expect(simulator.stats.requests == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func serviceUnavailableIsRetriedWithAFreshAPNsIDEachTime() async throws {
        let simulator = try makeSimulator(failingFirst: [.serviceUnavailable(), .serviceUnavailable()])
        let client = try makeClient(simulator)
        let notification = try request()
        let result = await client.send(notification, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [503, 503, 200])
        #expect(result.attempts.map(\.reason) == ["ServiceUnavailable", "ServiceUnavailable", nil])
        let ids = result.attempts.map(\.apnsID)
        #expect(Set(ids).count == 3, "every attempt carries its own apns-id")
        #expect(ids.first == notification.apnsID, "the first attempt uses the request's id")
        #expect(simulator.accepted.map { $0.apnsID.lowercased() } == [ids[2].string.lowercased()])
        #expect(simulator.stats.requests == 3)
        await client.shutdown()
        simulator.stop()
    }

    @Test func retryAfterIsWaitedFor() async throws {
        let simulator = try makeSimulator(failingFirst: [.tooManyRequests(retryAfterSeconds: 1)])
        let client = try makeClient(simulator)
        let started = ContinuousClock.now
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [429, 200])
        // A lower bound only: the retry must not come before the second APNs asked for.
        #expect(ContinuousClock.now - started >= .seconds(1))
        await client.shutdown()
        simulator.stop()
    }

    /// A simulator whose first answer is a 503 with `retryAfterSeconds`, and a client whose sandbox breaker
    /// has seen four pool faults: that 503 is the fifth and opens it, so its push is held by the breaker.
    func heldByTheBreaker(
        retryAfterSeconds: Int, _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws -> (APNsSimulator, APNsClient, CircuitBreaker) {
        let simulator = try makeSimulator(failingFirst: [.serviceUnavailable(retryAfterSeconds: retryAfterSeconds)])
        let client = try makeClient(simulator, adjust)
        let breaker = client.breaker(for: .sandbox)
        for _ in 0..<4 { breaker.record(.fault("503 ServiceUnavailable")) }
        return (simulator, client, breaker)
    }

    @Test func aRetryAfterOfAPushTheBreakerHeldIsWaitedOutEvenWhenTheBreakerClosesSooner() async throws {
        // The 503 is the pool's fifth fault in a row: the breaker opens, and the push waits for it rather
        // than counting an attempt. Another push's probe closes it within a tenth of a second; the held
        // push must still wait the two seconds APNs asked of it.
        let (simulator, client, breaker) = try heldByTheBreaker(retryAfterSeconds: 2) {
            $0.breaker.openDuration = ExponentialBackoff(initial: .milliseconds(100), maximum: .milliseconds(100))
        }
        let started = ContinuousClock.now
        let notification = try request()
        async let held = client.send(notification, policy: Self.fastRetries)
        #expect(await eventually { !breaker.isClosed }, "the 503 did not open the breaker")
        let probe = await client.send(try request(), policy: Self.fastRetries)
        #expect(probe.status == .delivered)
        #expect(breaker.isClosed)
        let result = await held
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [503, 200])
        // A lower bound only: the resend must not come before the time APNs asked for.
        #expect(ContinuousClock.now - started >= .seconds(2))
        await client.shutdown()
        simulator.stop()
    }

    @Test func aPushTheBreakerHeldExpiresAtOnceWhenItsRetryAfterOutlastsItsExpiration() async throws {
        // The 503's Retry-After (60 s) ends after the notification's expiration (about 5 s away): waiting
        // it out would only deliver a push Apple drops on arrival, so it ends `expired`, sent once.
        let (simulator, client, breaker) = try heldByTheBreaker(retryAfterSeconds: 60)
        var notification = try request()
        notification.expiration = .at(Self.wallClockSeconds + 5)
        let result = await client.send(notification, policy: Self.fastRetries)
        #expect(!breaker.isClosed, "the 503 did not open the breaker, so the held path was not taken")
        #expect(result.status == .expired)
        #expect(result.attempts.map(\.httpStatus) == [503])
        #expect(result.summary.contains("expires before APNs' Retry-After of 60 s"), "\(result.summary)")
        #expect(simulator.stats.requests == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func aRetryAfterLongerThanTheHoldLimitEndsAHeldPushAtOnceAndSaysSo() async throws {
        // Held by the breaker with a 60 s Retry-After and a 2 s hold limit: waiting would pass the limit,
        // so the push ends at once, and its summary tells the wait ahead from the time already waited.
        let (simulator, client, breaker) = try heldByTheBreaker(retryAfterSeconds: 60)
        var policy = Self.fastRetries
        policy.maximumHoldTime = .seconds(2)
        let result = await client.send(try request(), policy: policy)
        #expect(!breaker.isClosed, "the 503 did not open the breaker, so the held path was not taken")
        #expect(result.status == .expired)
        #expect(result.expiryReason == "holdLimitReached")
        #expect(result.attempts.map(\.httpStatus) == [503])
        #expect(result.summary.contains("a further 60 s would pass the 2000 ms hold limit"), "\(result.summary)")
        #expect(simulator.stats.requests == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func aSendWithdrawnWhileItsPoolIsDownEndsUnsent() async throws {
        let simulator = try makeSimulator()
        let client = try makeClient(simulator)
        let breaker = client.breaker(for: .sandbox)
        for _ in 0..<5 { breaker.record(.fault("503 ServiceUnavailable")) }
        let withdrawal = SendWithdrawal()
        let notification = try request()
        async let result = client.send(notification, policy: Self.fastRetries, withdrawal: withdrawal)
        // The half-open breaker's probe or a waiting push: either way, nothing leaves while it is held.
        #expect(await eventually { breaker.snapshot.waiting == 1 }, "the push never waited for the breaker")
        withdrawal.withdraw()
        let withdrawn = await result
        #expect(withdrawn.status == .withdrawn)
        #expect(withdrawn.attempts.isEmpty)
        #expect(simulator.stats.requests == 0)
        await client.shutdown()
        simulator.stop()
    }

    @Test func aProbeThatExpiresWaitingForItsDeviceGivesTheProbeBackAndThePoolRecovers() async throws {
        // The breaker is open; the oldest waiting push becomes its probe, but APNs paces its device (a
        // 429 with a 30 s Retry-After) and the push expires in 1 s, before its device's slot. Ending
        // there, it must give the probe back: another push then probes, is accepted and closes the
        // breaker. A probe taken and never answered held the pool half-open until the hold limit.
        let simulator = try makeSimulator()
        let client = try makeClient(simulator) {
            $0.breaker.openDuration = ExponentialBackoff(initial: .milliseconds(100), maximum: .milliseconds(100))
        }
        let breaker = client.breaker(for: .sandbox)
        for _ in 0..<5 { breaker.record(.fault("503 ServiceUnavailable")) }
        client.deviceThrottle.refused(Self.token, retryAfter: .seconds(30))
        var policy = Self.fastRetries
        policy.maximumHoldTime = .seconds(20)
        var paced = try request()
        paced.expiration = .at(Self.wallClockSeconds + 1)
        async let first = client.send(paced, policy: policy)
        #expect(await eventually { breaker.snapshot.waiting == 1 }, "the paced push never waited for the breaker")
        let other = APNsRequest(
            deviceToken: try DeviceToken(String(Self.token.reversed())), environment: .sandbox,
            topic: "com.example.app", payload: ["aps": ["alert": "hi"]])
        let second = await client.send(other, policy: policy)
        let expired = await first
        #expect(expired.status == .expired)
        #expect(expired.attempts.isEmpty)
        #expect(second.status == .delivered, "\(second.summary)")
        #expect(breaker.isClosed)
        #expect(simulator.stats.requests == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func aSendWithdrawnWhileItWaitsToRetryIsNotSentAgain() async throws {
        let simulator = try makeSimulator(failingFirst: [.tooManyRequests(retryAfterSeconds: 60)])
        let client = try makeClient(simulator)
        let withdrawal = SendWithdrawal()
        let policy = RetryPolicy(
            maximumAttempts: 4, maximumTotalTime: .seconds(600),
            backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(20)))
        let notification = try request()
        async let result = client.send(notification, policy: policy, withdrawal: withdrawal)
        #expect(await eventually { simulator.stats.requests == 1 }, "the first attempt never reached APNs")
        withdrawal.withdraw()
        let withdrawn = await result
        #expect(withdrawn.status == .withdrawn)
        #expect(withdrawn.attempts.map(\.httpStatus) == [429])
        #expect(simulator.stats.requests == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func goawayUnprocessedStreamsAreRetriedOnANewConnectionWithFreshIDs() async throws {
        // The sixth request is the last of the six on the first connection; GOAWAY leaves it unprocessed.
        let simulator = try makeSimulator {
            $0.faults.script = [ScriptedFault(.request(6), .goAway(processThisStream: false))]
        }
        let client = try makeClient(simulator)
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for _ in 0..<6 {
                group.addTask { await client.send(try! self.request(), policy: Self.fastRetries) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.status == .delivered })
        let retried = results.filter { $0.attempts.count == 2 }
        #expect(retried.count == 1)
        #expect(results.filter { $0.attempts.count == 1 }.count == 5)
        for result in retried {
            #expect(result.attempts[0].reason == "unprocessed")
            #expect(result.attempts[0].apnsID != result.attempts[1].apnsID)
        }
        let accepted = simulator.accepted
        #expect(accepted.count == 6 && Set(accepted.map(\.apnsID)).count == 6, "each notification processed once")
        #expect(Set(accepted.map(\.connectionID)).count == 2)
        #expect(simulator.stats.unprocessedStreams == 1)
        #expect(simulator.stats.connectionsAccepted == 2)
        await client.shutdown()
        simulator.stop()
    }

    @Test func expiredProviderTokenMakesTheSignerSignANewOne() async throws {
        // The first token is 25 minutes old where the simulator takes at most 20: old enough to be refused,
        // old enough (20 minutes) for the signer to honour a refresh.
        let now = Mutex<Int64>(Self.wallClockSeconds - 25 * 60)
        let signer = try ProviderTokenSigner(key: key, now: { now.withLock { $0 } })
        let first = try signer.token()
        now.withLock { $0 = Self.wallClockSeconds }
        let simulator = try makeSimulator(maximumTokenAge: 20 * 60)
        let client = try makeClient(simulator, signer: signer)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [403, 200])
        #expect(result.attempts.first?.reason == "ExpiredProviderToken")
        #expect(signer.signatureCount == 2)
        #expect(try signer.token().jwt != first.jwt)
        #expect(simulator.accepted.count == 1)
        await client.shutdown()
        simulator.stop()
    }

    @Test func expiredProviderTokenAgainAfterARefreshIsARefusedCredential() async throws {
        // A signer whose clock is two hours slow: every token it signs is already older than APNs allows.
        let signer = try ProviderTokenSigner(key: key, now: { Self.wallClockSeconds - 2 * 3600 })
        let simulator = try makeSimulator()
        let client = try makeClient(simulator, signer: signer)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .credentialRefused, "\(result.summary)")
        #expect(
            result.attempts.map(\.reason) == ["ExpiredProviderToken", "ExpiredProviderToken"],
            "one refresh, then the credential is what is wrong, not the push")
        #expect(result.summary.contains("clock"))
        // The credential is known to be wrong now: the next pushes are held back unsent, not each sent twice.
        for _ in 0..<5 {
            let next = await client.send(try request(), policy: Self.fastRetries)
            #expect(next.status == .credentialRefused)
            #expect(next.attempts.isEmpty, "\(next.summary)")
        }
        #expect(await eventually { simulator.stats.requests >= 2 })
        #expect(simulator.stats.requests == 2, "only the first push reached APNs")
        await client.shutdown()
        simulator.stop()
    }

    @Test func idleTimeoutRetriesOnANewConnection() async throws {
        let simulator = try makeSimulator(failingFirst: [InjectedFailure(status: 400, reason: "IdleTimeout")])
        let client = try makeClient(simulator)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.reason) == ["IdleTimeout", nil])
        #expect(simulator.accepted.map(\.connectionID) == [2], "delivered on a second connection")
        #expect(simulator.stats.connectionsAccepted == 2)
        await client.shutdown()
        simulator.stop()
    }

    @Test func frontEndsShuttingDownOneAfterAnotherSpendNoAttempts() async throws {
        // Six answers of 503 Shutdown in a row, more than the policy's four attempts: each is about the
        // connection (APNs did not take the push), so each is resent on a new connection, uncounted.
        let shutdown = InjectedFailure(status: 503, reason: "Shutdown")
        let simulator = try makeSimulator(failingFirst: Array(repeating: shutdown, count: 6))
        let client = try makeClient(simulator)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered, "\(result.summary)")
        #expect(result.attempts.map(\.reason) == Array(repeating: "Shutdown", count: 6) + [nil])
        #expect(simulator.stats.connectionsAccepted == 7, "each resend on a new connection")
        await client.shutdown()
        simulator.stop()
    }

    @Test func aThirdOfAnswersFailingUnderTheBreakersThresholdsFailsNoPush() async throws {
        // APNs answers 503 to about 30 % of requests: too few to open the breaker, and each push has only two
        // attempts. Counted against the pushes, about 9 % of them (0.3²) would fail although APNs never
        // said no to any; the pool's faults are its own, so every push retries until it is delivered.
        let simulator = try makeSimulator { $0.faults.failureRate = 0.3 }
        let client = try makeClient(simulator)
        let policy = RetryPolicy(
            maximumAttempts: 2, maximumTotalTime: .seconds(60),
            backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(40)))
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for _ in 0..<400 { group.addTask { await client.send(try! self.request(), policy: policy) } }
            return await group.reduce(into: [DeliveryResult]()) { $0.append($1) }
        }
        let statuses = Dictionary(grouping: results, by: \.status).mapValues(\.count)
        print("30 % 503s, 400 pushes of 2 attempts: \(statuses), \(simulator.stats.requests) requests")
        #expect(statuses == [.delivered: 400], "\(results.filter { $0.status != .delivered }.map(\.summary))")
        #expect(simulator.stats.requests > 450, "the faults happened")
        await client.shutdown()
        simulator.stop()
    }

    @Test func invalidRequestIsRejectedWithoutBeingSent() async throws {
        let simulator = try makeSimulator()
        let client = try makeClient(simulator)
        let oversized: JSONValue = ["aps": ["alert": .string(String(repeating: "x", count: 5000))]]
        let result = await client.send(try request(payload: oversized), policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.summary.contains("invalid request"))
        #expect(result.attempts.count == 1 && result.attempts[0].httpStatus == nil)
        #expect(simulator.stats.connectionsAccepted == 0)
        await client.shutdown()
        simulator.stop()
    }

    @Test func stalledServerExhaustsTheAttemptsAndFails() async throws {
        let simulator = try makeSimulator { $0.faults.stallRate = 1 }
        let client = try makeClient(simulator) { $0.requestTimeout = .milliseconds(200) }
        let policy = RetryPolicy(
            maximumAttempts: 2,
            backoff: ExponentialBackoff(
                initial: .milliseconds(10),
                maximum: .milliseconds(10)))
        let result = await client.send(try request(), policy: policy)
        #expect(result.status == .failed)
        #expect(result.attempts.map(\.reason) == ["requestTimeout", "requestTimeout"])
        #expect(result.summary.contains("2 attempts"))
        #expect(result.response == nil)
        #expect(simulator.stats.stalledStreams == 2)
        await client.shutdown()
        simulator.stop()
    }

    @Test func singleAttemptSendReturnsTheRawResponse() async throws {
        let simulator = try makeSimulator { $0.allowedBundles = ["com.example.other"] }
        let client = try makeClient(simulator)
        let response = try await client.send(try request())
        #expect(response.status == 400)
        #expect(response.reason == .topicDisallowed)
        await client.shutdown()
        simulator.stop()
    }

    // MARK: beginSend / finishSend: the first attempt told to a receiver, then the policy

    /// How many times a `beginSend` receiver was told.
    final class CompletionCount: Sendable {
        let calls = Atomic<Int>(0)
        var value: Int { calls.load(ordering: .relaxed) }
    }

    /// A receiver that calls a closure.
    final class Receiver: FirstAttemptReceiver {
        let ended: @Sendable (APNsClient.SendInProgress) -> Void
        init(_ ended: @escaping @Sendable (APNsClient.SendInProgress) -> Void) { self.ended = ended }
        func firstAttemptEnded(_ progress: APNsClient.SendInProgress) { ended(progress) }
    }

    /// `beginSend`'s completion, awaited; the count goes on counting calls after the first, which the
    /// tests read once the client has shut down and no completion can still be on its way.
    static func firstAttempt(_ client: APNsClient, _ request: APNsRequest, slot: Int = 7) async
        -> (progress: APNsClient.SendInProgress, count: CompletionCount)
    {
        let count = CompletionCount()
        let progress = await withCheckedContinuation { continuation in
            let receiver = Receiver { progress in
                // Resumed on the first call only; a second would be a bug the count reports.
                if count.calls.wrappingAdd(1, ordering: .relaxed).oldValue == 0 {
                    continuation.resume(returning: progress)
                }
            }
            client.beginSend(request, slot: slot, to: receiver)
        }
        #expect(progress.slot == slot, "the receiver hears the slot it was given")
        #expect(progress.client === client)
        return (progress, count)
    }

    @Test func aBegunSendThatIsAcceptedFinishesWithoutAnotherAttempt() async throws {
        let simulator = try makeSimulator()
        let client = try makeClient(simulator)
        let notification = try request()
        let (progress, count) = await Self.firstAttempt(client, notification)
        #expect(progress.isDelivered)
        let result = await client.finishSend(progress, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [200])
        #expect(result.attempts.first?.apnsID == notification.apnsID)
        let accepted = simulator.accepted
        #expect(accepted.map { $0.apnsID.lowercased() } == [notification.apnsID.string.lowercased()])
        #expect(result.response?.apnsUniqueID == accepted.first?.uniqueID && accepted.first?.uniqueID != nil)
        await client.shutdown()
        #expect(count.value == 1)
        simulator.stop()
    }

    @Test func aBegunSendThatIsRefusedRetriesInFinishSendWithFreshAPNsIDs() async throws {
        let simulator = try makeSimulator(failingFirst: [.serviceUnavailable(), .serviceUnavailable()])
        let client = try makeClient(simulator)
        let (progress, count) = await Self.firstAttempt(client, try request())
        #expect(!progress.isDelivered)
        #expect(simulator.stats.requests == 1, "beginSend sends the first attempt only")
        let result = await client.finishSend(progress, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [503, 503, 200])
        let ids = result.attempts.map(\.apnsID)
        #expect(Set(ids).count == 3, "every attempt carries its own apns-id")
        #expect(simulator.accepted.map { $0.apnsID.lowercased() } == [ids[2].string.lowercased()])
        await client.shutdown()
        #expect(count.value == 1)
        simulator.stop()
    }

    @Test func aBegunSendOfAnInvalidRequestCompletesAtOnceUnsent() async throws {
        let simulator = try makeSimulator()
        let client = try makeClient(simulator)
        let oversized: JSONValue = ["aps": ["alert": .string(String(repeating: "x", count: 5000))]]
        let completedBeforeReturn = Atomic<Bool>(false)
        let progress = Mutex<APNsClient.SendInProgress?>(nil)
        let receiver = Receiver { attempt in
            progress.withLock { $0 = attempt }
            completedBeforeReturn.store(true, ordering: .relaxed)
        }
        client.beginSend(try request(payload: oversized), slot: 0, to: receiver)
        let completedAtOnce = completedBeforeReturn.load(ordering: .relaxed)
        #expect(completedAtOnce)
        let begun = try #require(progress.withLock { $0 })
        let result = await client.finishSend(begun, policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.attempts.count == 1 && result.attempts[0].reason == "invalidRequest")
        #expect(simulator.stats.connectionsAccepted == 0)
        await client.shutdown()
        simulator.stop()
    }

    @Test func aBegunSendToAStalledServerEndsWithItsTimeout() async throws {
        let simulator = try makeSimulator { $0.faults.stallRate = 1 }
        let client = try makeClient(simulator) { $0.requestTimeout = .milliseconds(200) }
        let (progress, count) = await Self.firstAttempt(client, try request())
        let result = await client.finishSend(progress, policy: .never)
        #expect(result.status == .failed)
        #expect(result.attempts.map(\.reason) == ["requestTimeout"])
        await client.shutdown()
        #expect(count.value == 1)
        simulator.stop()
    }
}
