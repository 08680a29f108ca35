// APNs attempts counted as APNs answers them (the client's attempt observer), not when a push's retries
// are done; the reasons no-response attempts carry are labelled as themselves; the README's metric table
// names exactly the families the worker registers.

import APNs
import APNsSimulator
import Foundation
import HTTP2
import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite("Metrics: APNs attempts")
struct MetricsAttemptTests {
    static let app = "com.example.app"

    static func push() throws -> PlannedPush {
        PlannedPush(
            request: APNsRequest(
                deviceToken: try DeviceToken(String(repeating: "ab", count: 32)),
                environment: .sandbox, topic: app, payload: ["aps": ["alert": "hi"]]),
            app: app, ruleID: "r1")
    }

    static func attempt(status: Int?, reason: String?, latency: Duration = .milliseconds(40)) -> DeliveryAttempt {
        DeliveryAttempt(
            apnsID: .random(), httpStatus: status, reason: reason, errorMessage: nil, startedAt: Date(),
            latency: latency)
    }

    /// A first attempt answered 503 with Retry-After shows in `apns_requests_total` while the push still
    /// waits to retry; retries are counted once the push is done.
    @Test func anAttemptIsCountedWhenAnsweredWhileItsPushStillWaitsToRetry() async throws {
        var configuration = SimulatorConfiguration()
        configuration.faults.script = [
            ScriptedFault(.request(1), .fail(InjectedFailure.forStatus(503, retryAfterSeconds: 1)!))
        ]
        let simulator = try APNsSimulator(configuration)
        _ = try simulator.start()
        defer { simulator.stop() }
        let metrics = try WorkerMetrics()
        let observer = MetricsObserver(metrics: metrics, next: nil)
        var clientConfiguration = APNsClient.Configuration(
            credential: .token(
                try ProviderTokenSigner(
                    key: try ProviderTokenKey.generate(
                        keyID: "KEY1234567",
                        teamID: "TEAM123456"))))
        clientConfiguration.endpointOverride = simulator.baseURL
        clientConfiguration.trustRoots = .caFile(simulator.caFilePath)
        clientConfiguration.connectionsPerEnvironment = 1
        clientConfiguration.attemptObserver = { request, attempt in observer.attemptEnded(request, attempt) }
        let loops = EventLoopGroup(threadCount: 1)
        let client = try APNsClient(configuration: clientConfiguration, group: loops)
        let transport = APNsPushTransport(
            clients: [Self.app: [.sandbox: client]],
            policy: RetryPolicy(
                maximumAttempts: 3,
                backoff: ExponentialBackoff(
                    initial: .milliseconds(10),
                    maximum: .milliseconds(20))),
            observe: { result in observer.delivered(result) })
        let refused = metrics.apnsRequests.labels("alert", "503", "ServiceUnavailable")
        let accepted = metrics.apnsRequests.labels("alert", "200", "none")
        let retried = metrics.retries.labels("ServiceUnavailable")
        let finished = Flag()
        let push = try Self.push()

        // Through the batch (beginSend's first attempt), then the retry loop (attemptOnce).
        let sending = Task {
            let results = await transport.deliverAll([push][...])
            finished.value.store(true, ordering: .releasing)
            return results
        }
        #expect(await eventually(timeout: .seconds(10)) { refused.value == 1 }, "the 503 was never counted")
        let stillSending = !finished.value.load(ordering: .acquiring)
        #expect(stillSending, "Retry-After holds the retry back for a second")
        #expect(accepted.value == 0)
        #expect(retried.value == 0, "a retry is counted when the push is done")
        #expect(metrics.apnsResponseDuration.labels("sandbox").snapshot.count == 1)

        let results = await sending.value
        #expect(results.map(\.status) == [.delivered])
        #expect(results.first?.attempts.count == 2)
        #expect(refused.value == 1)
        #expect(accepted.value == 1)
        #expect(retried.value == 1)
        #expect(metrics.apnsRequests.labelSetCount == 2)
        #expect(metrics.apnsResponseDuration.labels("sandbox").snapshot.count == 2)
        await client.shutdown(gracePeriod: .seconds(1))
        await loops.shutdown()
    }

    /// An attempt without a response is counted under its transport error, but it is not an APNs
    /// response time: a connect failure's zero or a timeout's 30 s would drown APNs' real latency.
    @Test func anAttemptWithoutAResponseIsCountedButNotTimed() throws {
        let metrics = try WorkerMetrics()
        let observer = MetricsObserver(metrics: metrics, next: nil)
        let request = try Self.push().request

        observer.attemptEnded(request, Self.attempt(status: nil, reason: "requestTimeout", latency: .seconds(30)))
        observer.attemptEnded(request, Self.attempt(status: 410, reason: "Unregistered"))

        #expect(metrics.apnsRequests.labels("alert", "none", "requestTimeout").value == 1)
        #expect(metrics.apnsRequests.labels("alert", "410", "Unregistered").value == 1)
        let timed = metrics.apnsResponseDuration.labels("sandbox").snapshot
        #expect(timed.count == 1)
        #expect(abs(timed.sum - 0.04) < 1e-9)
    }

    /// A push's result no longer counts its attempts (they were counted as they ended): only retries
    /// and a token refused for good.
    @Test func aFinishedPushCountsItsRetriesAndInvalidTokenButNotItsAttempts() throws {
        let metrics = try WorkerMetrics()
        let observer = MetricsObserver(metrics: metrics, next: nil)
        let attempts = [
            Self.attempt(status: nil, reason: "connectFailed"), Self.attempt(status: 429, reason: "TooManyRequests"),
            Self.attempt(status: 410, reason: "Unregistered"),
        ]
        let response = APNsResponse(status: 410, reason: .unregistered)

        observer.delivered(
            DeliveryResult(
                status: .rejected, response: response, attempts: attempts,
                summary: "unregistered"))

        #expect(metrics.apnsRequests.labelSetCount == 0)
        #expect(metrics.retries.labels("connectFailed").value == 1)
        #expect(metrics.retries.labels("TooManyRequests").value == 1)
        #expect(metrics.retries.labelSetCount == 2)
        #expect(metrics.invalidTokens.labels("Unregistered").value == 1)
    }

    /// Every transport error the client records as an attempt's reason keeps its name on the dashboard
    /// (timeouts, refused connections and a full pool are what operators look for), and so do the
    /// client's own reasons for a request it could not send.
    @Test func everyNoResponseReasonOfTheClientIsALabelOfItsOwn() {
        let codes: [HTTP2ClientError.Code] = [
            .invalidConfiguration, .connectFailed, .connectTimeout, .tlsHandshakeFailed,
            .certificateVerificationFailed, .http2NotNegotiated, .connectionClosed, .unprocessed, .streamReset,
            .requestTimeout, .poolSaturated, .poolShutDown, .protocolError, .responseTooLarge,
        ]
        for reason in codes.map(\.description) + ["invalidRequest", "credential", "cancelled", "error"] {
            #expect(WorkerMetrics.reasonLabel(reason) == reason)
        }
    }

    @Test func buildInfoCarriesTheVersion() throws {
        let metrics = try WorkerMetrics()
        let text = String(decoding: metrics.registry.exposition(), as: UTF8.self)
        #expect(text.contains("apns_worker_build_info{version=\"\(WorkerVersion.current)\"} 1\n"))
        #expect(!WorkerVersion.current.isEmpty)
    }

    /// The README's table and the registered families are the same set: a metric added without its row,
    /// or a row left behind, fails here (the system test checks the same against the running binary).
    @Test func readmeMetricTableNamesExactlyTheRegisteredFamilies() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let documented = Set(
            readme.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("| `apns_worker_") else { return nil }
                return line.dropFirst(3).split(separator: "`").first.map(String.init)
            })
        let metrics = try WorkerMetrics()
        let text = String(decoding: metrics.registry.exposition(), as: UTF8.self)
        let registered = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
                .map { String($0.split(separator: " ")[2]) })
        #expect(documented.subtracting(registered).isEmpty, "in README, not registered")
        #expect(registered.subtracting(documented).isEmpty, "registered, not in README")
    }
}

private final class Flag: Sendable {
    let value = Atomic(false)
}
