// APNsClient end to end against the scriptable HTTP/2 test server answering like APNs: responses parsed,
// retries with fresh apns-ids, Retry-After, GOAWAY hand-back, token refresh, new connections.
import Foundation
import Synchronization
import Testing
@testable import APNs
import HTTP2
import JSON
import TestSupport

@Suite("APNs client against the test server", .serialized)
struct ClientSendTests {
    static let group = EventLoopGroup(threadCount: 1)
    static let token = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"

    let key: ProviderTokenKey

    init() throws {
        key = try ProviderTokenKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
    }

    func makeClient(_ server: HTTP2TestServer, signer: ProviderTokenSigner? = nil,
                    _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }) throws -> APNsClient {
        var configuration = APNsClient.Configuration(credential: .token(try signer ?? ProviderTokenSigner(key: key)))
        configuration.endpointOverride = "https://127.0.0.1:\(server.port)"
        configuration.trustRoots = .caFile(server.certificate.certificateFile)
        configuration.connectionsPerEnvironment = 1
        configuration.requestTimeout = .seconds(5)
        adjust(&configuration)
        return try APNsClient(configuration: configuration, group: Self.group)
    }

    func request(payload: JSONValue = ["aps": ["alert": "hi"]]) throws -> APNsRequest {
        APNsRequest(deviceToken: try DeviceToken(Self.token), environment: .sandbox, topic: "com.example.app",
            payload: payload)
    }

    static func header(_ request: HTTP2TestServer.Request, _ name: String) -> String? {
        request.headers.first { $0.0 == name }?.1
    }

    static func apnsError(_ status: Int, _ reason: String, extra: [(String, String)] = []) -> HTTP2TestServer.Reply {
        .respond(status: status, headers: [("content-type", "application/json")] + extra,
            body: Array(#"{"reason":"\#(reason)"}"#.utf8))
    }

    /// The apns-id of every request a test server saw, in order.
    final class SeenAPNsIDs: Sendable {
        private let ids = Mutex<[String]>([])
        var all: [String] { ids.withLock { $0 } }
        /// Records the request's apns-id; returns how many requests were seen, this one included.
        func record(_ request: HTTP2TestServer.Request) -> Int {
            ids.withLock { ids in
                ids.append(ClientSendTests.header(request, "apns-id") ?? "")
                return ids.count
            }
        }
    }

    /// A server answering 503 ServiceUnavailable to the first `failures` requests and 200 after.
    static func server(failingFirst failures: Int, recording seen: SeenAPNsIDs) throws -> HTTP2TestServer {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            seen.record(request) <= failures ? ClientSendTests.apnsError(503, "ServiceUnavailable") : .respond(status: 200)
        }
        return try HTTP2TestServer(options: options)
    }

    static let fastRetries = RetryPolicy(maximumAttempts: 4, maximumTotalTime: .seconds(10),
        backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(20)))

    @Test func deliveredResponseCarriesTheIDsAndARealProviderToken() async throws {
        let seen = Mutex<[HTTP2TestServer.Request]>([])
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            seen.withLock { $0.append(request) }
            let id = ClientSendTests.header(request, "apns-id") ?? ""
            return .respond(status: 200, headers: [("apns-id", id.uppercased()),
                                                   ("apns-unique-id", "a9d4f6a0-0000-4000-8000-000000000001")])
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let notification = try request()
        let result = await client.send(notification, policy: .never)
        #expect(result.status == .delivered)
        #expect(result.response?.apnsID == notification.apnsID)
        #expect(result.response?.apnsUniqueID == "a9d4f6a0-0000-4000-8000-000000000001")
        #expect(result.attempts.count == 1)
        #expect(result.attempts[0].httpStatus == 200)
        #expect(result.attempts[0].latency > .zero)
        let request = try #require(seen.withLock { $0.first })
        #expect(request.method == "POST")
        #expect(request.path == "/3/device/" + Self.token)
        #expect(Self.header(request, "apns-topic") == "com.example.app")
        #expect(Self.header(request, "apns-push-type") == "alert")
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"aps":{"alert":"hi"}}"#)
        let authorization = try #require(Self.header(request, "authorization"))
        #expect(authorization.hasPrefix("bearer "))
        _ = try ProviderTokenVerifier(trusting: [key]).verify(String(authorization.dropFirst("bearer ".count)))
        await client.shutdown()
        await server.stop()
    }

    @Test func unregisteredTokenIsRejectedWithItsTimestamp() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in
            .respond(status: 410, headers: [("content-type", "application/json")],
                body: Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8))
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.response?.reason == .unregistered)
        #expect(result.response?.timestampMilliseconds == 1_700_000_000_000)
        #expect(result.reasonClass == .invalidToken)
        #expect(result.attempts.count == 1, "an invalid token is never retried")
        #expect(server.snapshot.requests == 1)
        await client.shutdown()
        await server.stop()
    }

    @Test func serviceUnavailableIsRetriedWithAFreshAPNsIDEachTime() async throws {
        let seen = SeenAPNsIDs()
        let server = try Self.server(failingFirst: 2, recording: seen)
        let client = try makeClient(server)
        let notification = try request()
        let result = await client.send(notification, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [503, 503, 200])
        #expect(result.attempts.map(\.reason) == ["ServiceUnavailable", "ServiceUnavailable", nil])
        let ids = seen.all
        #expect(Set(ids).count == 3, "every attempt carries its own apns-id")
        #expect(ids.first == notification.apnsID.string, "the first attempt uses the request's id")
        #expect(result.attempts.map(\.apnsID.string) == ids)
        await client.shutdown()
        await server.stop()
    }

    @Test func retryAfterIsWaitedFor() async throws {
        let count = Mutex(0)
        var options = HTTP2TestServer.Options()
        options.reply = { _ in
            count.withLock { $0 += 1; return $0 } == 1
                ? ClientSendTests.apnsError(429, "TooManyRequests", extra: [("retry-after", "1")])
                : .respond(status: 200)
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let started = ContinuousClock.now
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(ContinuousClock.now - started >= .seconds(1))
        await client.shutdown()
        await server.stop()
    }

    @Test func goawayUnprocessedStreamsAreRetriedOnANewConnectionWithFreshIDs() async throws {
        let processed = Mutex<[String]>([])
        var options = HTTP2TestServer.Options()
        options.goaway = (afterRequests: 6, lastProcessed: 2)
        options.reply = { request in
            processed.withLock { $0.append(ClientSendTests.header(request, "apns-id") ?? "") }
            return .respond(status: 200)
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for _ in 0..<6 {
                group.addTask { await client.send(try! self.request(), policy: Self.fastRetries) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.status == .delivered })
        let retried = results.filter { $0.attempts.count == 2 }
        #expect(retried.count == 4)
        for result in retried {
            #expect(result.attempts[0].reason == "unprocessed")
            #expect(result.attempts[0].apnsID != result.attempts[1].apnsID)
        }
        let ids = processed.withLock { $0 }
        #expect(ids.count == 6 && Set(ids).count == 6, "each notification processed once")
        #expect(server.snapshot.connections == 2)
        await client.shutdown()
        await server.stop()
    }

    @Test func expiredProviderTokenMakesTheSignerSignANewOne() async throws {
        let now = Mutex<Int64>(1_800_000_000)
        let signer = try ProviderTokenSigner(key: key, now: { now.withLock { $0 } })
        let first = try signer.token()
        now.withLock { $0 += 25 * 60 }
        let authorizations = Mutex<[String]>([])
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            let authorization = ClientSendTests.header(request, "authorization") ?? ""
            authorizations.withLock { $0.append(authorization) }
            return authorization == "bearer " + first.jwt
                ? ClientSendTests.apnsError(403, "ExpiredProviderToken") : .respond(status: 200)
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server, signer: signer)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [403, 200])
        let seen = authorizations.withLock { $0 }
        #expect(seen.count == 2 && seen[0] != seen[1])
        #expect(signer.signatureCount == 2)
        await client.shutdown()
        await server.stop()
    }

    @Test func expiredProviderTokenAgainAfterARefreshIsARefusedCredential() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in ClientSendTests.apnsError(403, "ExpiredProviderToken") }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .credentialRefused, "\(result.summary)")
        #expect(result.attempts.map(\.reason) == ["ExpiredProviderToken", "ExpiredProviderToken"],
            "one refresh, then the credential is what is wrong, not the push")
        #expect(result.summary.contains("clock"))
        await client.shutdown()
        await server.stop()
    }

    @Test func idleTimeoutRetriesOnANewConnection() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            request.connection == 1 ? ClientSendTests.apnsError(400, "IdleTimeout") : .respond(status: 200)
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let result = await client.send(try request(), policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.reason) == ["IdleTimeout", nil])
        #expect(server.snapshot.requestsPerConnection == [1: 1, 2: 1])
        await client.shutdown()
        await server.stop()
    }

    @Test func invalidRequestIsRejectedWithoutBeingSent() async throws {
        let server = try HTTP2TestServer()
        let client = try makeClient(server)
        let oversized: JSONValue = ["aps": ["alert": .string(String(repeating: "x", count: 5000))]]
        let result = await client.send(try request(payload: oversized), policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.summary.contains("invalid request"))
        #expect(result.attempts.count == 1 && result.attempts[0].httpStatus == nil)
        #expect(server.snapshot.connections == 0)
        await client.shutdown()
        await server.stop()
    }

    @Test func stalledServerExhaustsTheAttemptsAndFails() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .stall }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server) { $0.requestTimeout = .milliseconds(200) }
        let policy = RetryPolicy(maximumAttempts: 2, backoff: ExponentialBackoff(initial: .milliseconds(10),
            maximum: .milliseconds(10)))
        let result = await client.send(try request(), policy: policy)
        #expect(result.status == .failed)
        #expect(result.attempts.map(\.reason) == ["requestTimeout", "requestTimeout"])
        #expect(result.summary.contains("2 attempts"))
        #expect(result.response == nil)
        await client.shutdown()
        await server.stop()
    }

    @Test func singleAttemptSendReturnsTheRawResponse() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in ClientSendTests.apnsError(400, "BadTopic") }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let response = try await client.send(try request())
        #expect(response.status == 400)
        #expect(response.reason == .badTopic)
        await client.shutdown()
        await server.stop()
    }

    // MARK: beginSend / finishSend: the first attempt with a completion handler, then the policy

    /// `beginSend`'s completion, awaited; also how many times it was called.
    static func firstAttempt(_ client: APNsClient, _ request: APNsRequest) async
        -> (progress: APNsClient.SendInProgress, calls: Int)
    {
        let calls = Atomic<Int>(0)
        let progress = await withCheckedContinuation { continuation in
            client.beginSend(request) { progress in
                // Resumed on the first call only; a second would be a bug the count below reports.
                if calls.wrappingAdd(1, ordering: .relaxed).oldValue == 0 { continuation.resume(returning: progress) }
            }
        }
        try? await Task.sleep(for: .milliseconds(50))
        return (progress, calls.load(ordering: .relaxed))
    }

    @Test func aBegunSendThatIsAcceptedFinishesWithoutAnotherAttempt() async throws {
        let seen = Mutex<[String]>([])
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            seen.withLock { $0.append(ClientSendTests.header(request, "apns-id") ?? "") }
            return .respond(status: 200, headers: [("apns-unique-id", "a9d4f6a0-0000-4000-8000-000000000001")])
        }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server)
        let notification = try request()
        let (progress, calls) = await Self.firstAttempt(client, notification)
        #expect(calls == 1)
        #expect(progress.isDelivered)
        let result = await client.finishSend(progress, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [200])
        #expect(result.attempts.first?.apnsID == notification.apnsID)
        #expect(result.response?.apnsUniqueID == "a9d4f6a0-0000-4000-8000-000000000001")
        #expect(seen.withLock { $0 } == [notification.apnsID.string])
        await client.shutdown()
        await server.stop()
    }

    @Test func aBegunSendThatIsRefusedRetriesInFinishSendWithFreshAPNsIDs() async throws {
        let seen = SeenAPNsIDs()
        let server = try Self.server(failingFirst: 2, recording: seen)
        let client = try makeClient(server)
        let (progress, calls) = await Self.firstAttempt(client, try request())
        #expect(calls == 1)
        #expect(!progress.isDelivered)
        #expect(seen.all.count == 1, "beginSend sends the first attempt only")
        let result = await client.finishSend(progress, policy: Self.fastRetries)
        #expect(result.status == .delivered)
        #expect(result.attempts.map(\.httpStatus) == [503, 503, 200])
        let ids = seen.all
        #expect(Set(ids).count == 3, "every attempt carries its own apns-id")
        #expect(result.attempts.map(\.apnsID.string) == ids)
        await client.shutdown()
        await server.stop()
    }

    @Test func aBegunSendOfAnInvalidRequestCompletesAtOnceUnsent() async throws {
        let server = try HTTP2TestServer()
        let client = try makeClient(server)
        let oversized: JSONValue = ["aps": ["alert": .string(String(repeating: "x", count: 5000))]]
        let completedBeforeReturn = Atomic<Bool>(false)
        let progress = Mutex<APNsClient.SendInProgress?>(nil)
        client.beginSend(try request(payload: oversized)) { attempt in
            progress.withLock { $0 = attempt }
            completedBeforeReturn.store(true, ordering: .relaxed)
        }
        let completedAtOnce = completedBeforeReturn.load(ordering: .relaxed)
        #expect(completedAtOnce)
        let begun = try #require(progress.withLock { $0 })
        let result = await client.finishSend(begun, policy: Self.fastRetries)
        #expect(result.status == .rejected)
        #expect(result.attempts.count == 1 && result.attempts[0].reason == "invalidRequest")
        #expect(server.snapshot.connections == 0)
        await client.shutdown()
        await server.stop()
    }

    @Test func aBegunSendToAStalledServerEndsWithItsTimeout() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { _ in .stall }
        let server = try HTTP2TestServer(options: options)
        let client = try makeClient(server) { $0.requestTimeout = .milliseconds(200) }
        let (progress, calls) = await Self.firstAttempt(client, try request())
        #expect(calls == 1)
        let result = await client.finishSend(progress, policy: .never)
        #expect(result.status == .failed)
        #expect(result.attempts.map(\.reason) == ["requestTimeout"])
        await client.shutdown()
        await server.stop()
    }
}
