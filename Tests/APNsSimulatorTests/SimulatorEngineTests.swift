// The engine's plan for a complete request: faults before validation, what gets recorded (never the
// provider token), and what gets counted.

import APNs
import Platform
import Testing

@testable import APNsSimulator

@Suite struct SimulatorEngineTests {
    func engine(
        _ configure: (inout SimulatorConfiguration) -> Void = { _ in },
        authentication: RequestValidator.Authentication = .none
    ) -> SimulatorEngine {
        var configuration = SimulatorConfiguration()
        configure(&configuration)
        return SimulatorEngine(
            configuration: configuration,
            validator: RequestValidator(
                authentication: authentication, devices: configuration.devices,
                allowedBundles: configuration.allowedBundles, startMilliseconds: 0))
    }

    func context(_ id: Int = 1) -> ConnectionContext { ConnectionContext(id: id, random: SimulatorRandom(seed: 5)) }

    @Test func anAcceptedRequestIsRecordedWithoutItsProviderToken() throws {
        let key = try ProviderTokenKey.generate(keyID: "KEYAAAAAAA", teamID: "TEAM000001")
        let authenticator = ProviderTokenAuthenticator(
            verifier: ProviderTokenVerifier(trusting: [key]), teamByKeyID: [:], maximumAge: 3600,
            minimumUpdateInterval: 1200)
        let engine = engine(authentication: .providerToken(authenticator))
        let jwt = try key.makeToken(issuedAt: WallClockTime.milliseconds() / 1000).jwt
        let id = "123e4567-e89b-42d3-a456-426614174000"
        let request = alertRequest(headers: [
            ("authorization", "bearer " + jwt), ("apns-push-type", "alert"), ("apns-topic", "com.example.app"),
            ("apns-id", id), ("x-custom", "1"),
        ])
        var connection = context(7)
        let plan = engine.planAndReport(request, streamID: 3, context: &connection)
        guard case .respond(let response) = plan.answer else {
            Issue.record("expected an answer, got \(plan.answer)")
            return
        }
        #expect(response.status == 200 && response.apnsID == id && response.reason == nil)
        let uniqueID = try #require(response.uniqueID)
        let record = try #require(engine.accepted.first)
        #expect(record.connectionID == 7 && record.streamID == 3)
        #expect(record.deviceToken == goodToken && record.apnsID == id && record.uniqueID == uniqueID)
        #expect(record.keyID == "KEYAAAAAAA" && record.topic == "com.example.app" && record.pushType == .alert)
        #expect(record.headers.map(\.name) == ["apns-push-type", "apns-topic", "apns-id", "x-custom"])
        #expect(record.header("x-custom") == "1")
        #expect(record.payloadJSON == ["aps": ["alert": "hi"]])
        #expect(!"\(record)".contains(jwt), "the provider token must not be kept")
        #expect(engine.stats.responses == [ResponseKind(status: 200, reason: nil): 1])
    }

    @Test func aRejectionIsCountedNotRecordedAndGetsAnUppercaseIdWhenTheClientSentNone() {
        let engine = engine()
        var connection = context()
        let plan = engine.planAndReport(alertRequest(body: ""), streamID: 1, context: &connection)
        guard case .respond(let response) = plan.answer else {
            Issue.record("expected an answer")
            return
        }
        #expect(response.status == 400 && response.reason == "PayloadEmpty")
        #expect(response.apnsID == response.apnsID.uppercased() && response.apnsID.count == 36)
        #expect(response.uniqueID == nil)
        #expect(engine.accepted.isEmpty)
        #expect(engine.stats.count(reason: "PayloadEmpty") == 1 && engine.stats.requests == 1)
    }

    @Test func faultsComeBeforeValidation() {
        let engine = engine {
            $0.faults.script = [
                ScriptedFault(.request(1), .fail(.serviceUnavailable(retryAfterSeconds: 2))),
                ScriptedFault(.request(2), .stall),
                ScriptedFault(.request(3), .dropConnection),
                ScriptedFault(.request(4), .goAway(processThisStream: false)),
                ScriptedFault(.request(5), .goAway(processThisStream: true)),
            ]
        }
        var connection = context()
        let invalid = alertRequest(method: "GET")
        let failed = engine.planAndReport(invalid, streamID: 1, context: &connection)
        guard case .respond(let response) = failed.answer else {
            Issue.record("expected the injected failure")
            return
        }
        #expect(response.status == 503 && response.reason == "ServiceUnavailable" && response.retryAfterSeconds == 2)
        guard case .stall = engine.planAndReport(invalid, streamID: 3, context: &connection).answer else {
            Issue.record("expected a stall")
            return
        }
        #expect(engine.planAndReport(invalid, streamID: 5, context: &connection).dropConnection)
        let unprocessed = engine.planAndReport(invalid, streamID: 7, context: &connection)
        #expect(unprocessed.goAway == .beforeThisStream)
        let processed = engine.planAndReport(alertRequest(), streamID: 9, context: &connection)
        #expect(processed.goAway == .includingThisStream)
        let stats = engine.stats
        #expect(stats.stalledStreams == 1 && stats.droppedConnections == 1 && stats.unprocessedStreams == 1)
        #expect(stats.count(status: 503) == 1 && stats.count(status: 200) == 1 && stats.requests == 5)
    }

    @Test func latencyBecomesTheAnswersDelay() {
        let engine = engine { $0.faults.latency = LatencyDistribution(fixedMilliseconds: 40) }
        var connection = context()
        #expect(engine.planAndReport(alertRequest(), streamID: 1, context: &connection).delayNanoseconds == 40_000_000)
    }

    @Test func theRecordRingIsBoundedByTheConfiguredCapacity() {
        let engine = engine { $0.acceptedCapacity = 2 }
        var connection = context()
        for stream in [1, 3, 5] {
            _ = engine.planAndReport(alertRequest(), streamID: Int32(stream), context: &connection)
        }
        #expect(engine.accepted.map(\.streamID) == [3, 5])
        #expect(engine.stats.acceptedDropped == 1)
    }

    @Test func capacityZeroKeepsNothingButCountsEveryAcceptedPush() {
        let engine = engine { $0.acceptedCapacity = 0 }
        var connection = context()
        for stream in [1, 3, 5] {
            let plan = engine.planAndReport(alertRequest(), streamID: Int32(stream), context: &connection)
            guard case .respond(let response) = plan.answer else {
                Issue.record("no answer")
                continue
            }
            #expect(response.status == 200)
        }
        #expect(engine.accepted.isEmpty)
        #expect(engine.stats.requests == 3 && engine.stats.acceptedDropped == 3)
    }

    @Test func waitForAcceptedReturnsOnceEnoughArrived() async throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        defer { simulator.stop() }
        let clock = ContinuousClock()
        let started = clock.now
        let none = await simulator.waitForAccepted(count: 1, timeout: .milliseconds(50))
        #expect(none.isEmpty && clock.now - started >= .milliseconds(50))
    }
}

extension SimulatorEngine {
    /// `plan`, then the connection's report to the stats, as a connection does after each read.
    func planAndReport(_ request: IncomingRequest, streamID: Int32, context: inout ConnectionContext) -> StreamPlan {
        let plan = self.plan(request, streamID: streamID, context: &context)
        report(&context)
        return plan
    }
}
