// Invalid-token events are made only on answers that prove a token invalid, since cleanup services
// delete tokens on them: Unregistered, DeviceTokenNotForTopic (for its topic), and BadDeviceToken only
// once the app's other environment refused it too (or there is none). Through the real transport, a
// simulator per environment and the pipeline with in-memory Kafka; every record checked against schemas/.

import APNs
import APNsSimulator
import Foundation
import HTTP2
import JSON
import TestSupport
import Testing

@testable import Worker

@Suite("Invalid-token events", .serialized)
struct InvalidTokenTests {
    static let app = "com.example.app"

    static func token(_ index: Int) -> String { String(format: "%064x", 0x1d0000 + index) }

    static let unregisteredSince: Int64 = 1_795_953_600_000

    /// The devices of the one event: what each environment's APNs says about them.
    enum Device: Int, CaseIterable {
        case unregistered, badInProductionOnly, badInBoth, notForTopic, fine
        var token: String { InvalidTokenTests.token(rawValue) }
    }

    static func production() -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration()
        configuration.devices.unregistered = [Device.unregistered.token: unregisteredSince]
        configuration.devices.badTokens = [Device.badInProductionOnly.token, Device.badInBoth.token]
        configuration.devices.bundleByToken = [Device.notForTopic.token: "com.example.other"]
        return configuration
    }

    static func sandbox() -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration()
        configuration.devices.badTokens = [Device.badInBoth.token]
        return configuration
    }

    static func client(_ simulator: APNsSimulator, loops: EventLoopGroup, observer: MetricsObserver) throws
        -> APNsClient
    {
        try APNsPushTransportTests.client(simulator, loops: loops) { configuration in
            configuration.attemptObserver = { request, attempt in observer.attemptEnded(request, attempt) }
        }
    }

    static let policy = RetryPolicy(
        maximumAttempts: 3,
        backoff: ExponentialBackoff(
            initial: .milliseconds(10),
            maximum: .milliseconds(20)))

    /// What one event with every kind of device produced, with the app's environments as configured.
    struct Run {
        var outcomes: [String: JSONValue] = [:]
        var invalidTokens: [String: JSONValue] = [:]
        var records: (outcomes: [JSONValue], invalidTokens: [JSONValue]) = ([], [])
        var acceptedInProduction: [String] = []
        var acceptedInSandbox: [String] = []
        var invalidTokenMetric: [String: Int] = [:]
    }

    static func run(environments: Set<APNsEnvironment>) async throws -> Run {
        let productionSimulator = try APNsSimulator(production())
        let sandboxSimulator = try APNsSimulator(sandbox())
        _ = try productionSimulator.start()
        _ = try sandboxSimulator.start()
        defer {
            productionSimulator.stop()
            sandboxSimulator.stop()
        }
        let metrics = try WorkerMetrics()
        let observer = MetricsObserver(metrics: metrics, next: nil)
        let loops = EventLoopGroup(threadCount: 1)
        var clients: [APNsEnvironment: APNsClient] = [:]
        if environments.contains(.production) {
            clients[.production] = try client(productionSimulator, loops: loops, observer: observer)
        }
        if environments.contains(.sandbox) {
            clients[.sandbox] = try client(sandboxSimulator, loops: loops, observer: observer)
        }
        let transport = APNsPushTransport(
            clients: [app: clients], policy: policy, observe: { result in observer.delivered(result) })
        // makeRecord declares every device a production one.
        let source = InMemoryEventSource(records: [
            makeRecord(partition: 0, offset: 0, devices: Device.allCases.map(\.token), id: "evt-tokens")
        ])
        let sink = InMemoryResultSink()
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: transport)
        try pipeline.start()
        let finished = await eventually(timeout: .seconds(30)) { pipeline.counters.recordsFinished == 1 }
        #expect(finished, "the event was never finished")

        var run = Run()
        run.records = (sink.json(on: "push.outcomes"), sink.json(on: "push.invalid-tokens"))
        for outcome in run.records.outcomes { run.outcomes[outcome["device_token"]?.stringValue ?? "?"] = outcome }
        for event in run.records.invalidTokens { run.invalidTokens[event["device_token"]?.stringValue ?? "?"] = event }
        run.acceptedInProduction = productionSimulator.accepted.map(\.deviceToken)
        run.acceptedInSandbox = sandboxSimulator.accepted.map(\.deviceToken)
        for reason in ["Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic"] {
            run.invalidTokenMetric[reason] = Int(metrics.invalidTokens.labels(reason).value)
        }
        _ = await pipeline.drain(timeout: 5)
        for client in clients.values { await client.shutdown(gracePeriod: .seconds(1)) }
        await loops.shutdown()
        return run
    }

    @Test func onlyDefinitiveAnswersMakeInvalidTokenEventsWhenBothEnvironmentsAreConfigured() async throws {
        let run = try await Self.run(environments: [.production, .sandbox])

        #expect(run.records.outcomes.count == Device.allCases.count, "one outcome per device")
        #expect(
            Set(run.invalidTokens.keys) == [
                Device.unregistered.token, Device.badInBoth.token,
                Device.notForTopic.token,
            ])
        #expect(run.records.invalidTokens.count == 3, "one event per invalid token")

        let unregistered = try #require(run.invalidTokens[Device.unregistered.token])
        #expect(unregistered["reason"] == "Unregistered")
        #expect(unregistered["environment"] == "production")
        #expect(unregistered["checked_environments"] == .array(["production"]))
        #expect(unregistered["invalid_since"]?.stringValue?.hasPrefix("2026-11-29T") == true)

        // A development build's token sent to production: delivered in sandbox, and nothing deleted.
        let movedOutcome = try #require(run.outcomes[Device.badInProductionOnly.token])
        #expect(movedOutcome["status"] == "delivered")
        #expect(movedOutcome["environment"] == "sandbox")
        #expect(movedOutcome["environment_fallback"] == true)
        let attempts = movedOutcome["attempts"]?.arrayValue ?? []
        #expect(attempts.map { $0["http_status"] } == [400, 200])
        #expect(attempts.map { $0["reason"] } == ["BadDeviceToken", .null])
        #expect(Set(attempts.compactMap { $0["apns_id"]?.stringValue }).count == 2, "a fresh apns-id for the second")
        #expect(movedOutcome["apns_id"] == attempts.last?["apns_id"])
        #expect(run.acceptedInSandbox == [Device.badInProductionOnly.token])

        let bothRefused = try #require(run.invalidTokens[Device.badInBoth.token])
        #expect(bothRefused["reason"] == "BadDeviceToken")
        #expect(bothRefused["checked_environments"] == .array(["production", "sandbox"]))
        #expect(bothRefused["environment"] == "sandbox")
        let bothOutcome = try #require(run.outcomes[Device.badInBoth.token])
        #expect(bothOutcome["status"] == "rejected")
        #expect(bothOutcome["environment_fallback"] == true)
        #expect(bothOutcome["attempts"]?.arrayValue?.count == 2)

        let notForTopic = try #require(run.invalidTokens[Device.notForTopic.token])
        #expect(notForTopic["reason"] == "DeviceTokenNotForTopic")
        #expect(notForTopic["topic"] == .string(Self.app))
        #expect(notForTopic["checked_environments"] == .array(["production"]))

        let fine = try #require(run.outcomes[Device.fine.token])
        #expect(fine["status"] == "delivered")
        #expect(fine["environment"] == "production")
        #expect(fine["environment_fallback"] == false)
        #expect(run.acceptedInProduction == [Device.fine.token])

        #expect(
            run.invalidTokenMetric == [
                "Unregistered": 1, "ExpiredToken": 0, "BadDeviceToken": 1,
                "DeviceTokenNotForTopic": 1,
            ], "the metric counts the events made")
        try SchemaCheck.validate(run.records.outcomes, against: "push-outcome")
        try SchemaCheck.validate(run.records.invalidTokens, against: "invalid-token")
    }

    @Test func badDeviceTokenIsAnEventSayingSoWhenTheAppHasOnlyOneEnvironment() async throws {
        let run = try await Self.run(environments: [.production])

        #expect(run.records.outcomes.count == Device.allCases.count)
        for device in [Device.badInProductionOnly, .badInBoth] {
            let event = try #require(run.invalidTokens[device.token], "\(device)")
            #expect(event["reason"] == "BadDeviceToken")
            #expect(event["environment"] == "production")
            #expect(event["checked_environments"] == .array(["production"]), "no other environment was asked")
            let outcome = try #require(run.outcomes[device.token])
            #expect(outcome["environment"] == "production")
            #expect(outcome["environment_fallback"] == false)
            #expect(outcome["attempts"]?.arrayValue?.count == 1)
        }
        #expect(run.records.invalidTokens.count == 4)
        #expect(run.acceptedInSandbox.isEmpty)
        #expect(run.invalidTokenMetric["BadDeviceToken"] == 2)
        try SchemaCheck.validate(run.records.outcomes, against: "push-outcome")
        try SchemaCheck.validate(run.records.invalidTokens, against: "invalid-token")
    }

    /// `deliver` (one push, not the batch) tries the other environment the same way.
    @Test func deliverSendsABadDeviceTokenOnceMoreInTheOtherEnvironment() async throws {
        let productionSimulator = try APNsSimulator(Self.production())
        let sandboxSimulator = try APNsSimulator(Self.sandbox())
        _ = try productionSimulator.start()
        _ = try sandboxSimulator.start()
        defer {
            productionSimulator.stop()
            sandboxSimulator.stop()
        }
        let observer = MetricsObserver(metrics: try WorkerMetrics(), next: nil)
        let loops = EventLoopGroup(threadCount: 1)
        let production = try Self.client(productionSimulator, loops: loops, observer: observer)
        let sandbox = try Self.client(sandboxSimulator, loops: loops, observer: observer)
        let transport = APNsPushTransport(
            clients: [Self.app: [.production: production, .sandbox: sandbox]], policy: Self.policy)
        let request = APNsRequest(
            deviceToken: try DeviceToken(Device.badInProductionOnly.token),
            environment: .production, topic: Self.app, payload: ["aps": ["alert": "hi"]])

        let result = await transport.deliver(PlannedPush(request: request, app: Self.app, ruleID: "r"))

        #expect(result.status == .delivered, "\(result.summary)")
        #expect(result.attempts.map(\.httpStatus) == [400, 200])
        #expect(result.attempts.first?.apnsID == request.apnsID)
        #expect(result.attempts.last?.apnsID != request.apnsID, "a fresh apns-id in the other environment")
        #expect(EnvironmentsAsked(result, sentTo: .production).environments == [.production, .sandbox])
        #expect(sandboxSimulator.accepted.map(\.deviceToken) == [Device.badInProductionOnly.token])
        #expect(productionSimulator.accepted.isEmpty)
        #expect(InvalidTokenRecord.invalidatingReason(of: result) == nil)
        await production.shutdown(gracePeriod: .seconds(1))
        await sandbox.shutdown(gracePeriod: .seconds(1))
        await loops.shutdown()
    }

    /// What no simulator answers: ExpiredToken, and answers that prove nothing about the token.
    @Test func onlyAFinalDefinitiveAnswerIsAnInvalidatingReason() throws {
        let request = APNsRequest(
            deviceToken: try DeviceToken(Self.token(9)), environment: .production,
            topic: Self.app, payload: ["aps": ["alert": "hi"]])
        let push = PlannedPush(request: request, app: Self.app, ruleID: "r")
        func reason(_ status: Int, _ reason: String) -> APNsErrorReason? {
            InvalidTokenRecord.invalidatingReason(of: apnsAnswer(push, status: status, reason: reason))
        }
        #expect(reason(410, "ExpiredToken") == .expiredToken)
        #expect(reason(410, "Unregistered") == .unregistered)
        #expect(reason(400, "Unregistered") == nil, "Unregistered is only definitive as a 410")
        #expect(reason(400, "DeviceTokenNotForTopic") == .deviceTokenNotForTopic)
        #expect(reason(400, "BadTopic") == nil)
        #expect(reason(503, "ServiceUnavailable") == nil)
        #expect(reason(403, "InvalidProviderToken") == nil)
        let noAnswer = DeliveryResult(status: .failed, response: nil, attempts: [], summary: "timeout")
        #expect(InvalidTokenRecord.invalidatingReason(of: noAnswer) == nil)
    }
}

/// Validates records with check-jsonschema, the independent validator scripts/setup.sh --test installs
/// into .venv (or the one $APNS_WORKER_CHECK_JSONSCHEMA names).
enum SchemaCheck {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func validate(_ records: [JSONValue], against schema: String) throws {
        let environment = ProcessInfo.processInfo.environment
        let tool =
            environment["APNS_WORKER_CHECK_JSONSCHEMA"]
            ?? root.appendingPathComponent(".venv/bin/check-jsonschema").path
        guard FileManager.default.isExecutableFile(atPath: tool) else {
            let hint = "run scripts/setup.sh --test, or set APNS_WORKER_CHECK_JSONSCHEMA"
            Issue.record("check-jsonschema not found at \(tool): \(hint)")
            return
        }
        try #require(!records.isEmpty)
        let directory = TemporaryDirectory(prefix: "invalid-token-tests")
        let files = records.enumerated().map { index, record in
            directory.write("\(schema)-\(index).json", record.compactString)
        }
        let schemaFile = root.appendingPathComponent("schemas/\(schema).schema.json").path
        let result = try runProcessCapturing(tool, ["--schemafile", schemaFile] + files, mergingErrors: true)
        #expect(result.status == 0, "\(schema): \(result.outputText)")
    }
}
