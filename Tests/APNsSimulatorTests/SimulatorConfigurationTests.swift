// The configuration file format: every section read, and errors that name the key and the fix.

import APNs
import JSON
import Testing

@testable import APNsSimulator

@Suite struct SimulatorConfigurationTests {
    func configuration(_ json: String) throws -> SimulatorConfiguration {
        try SimulatorConfiguration(json: try JSONValue(parsing: json))
    }

    func configurationError(_ json: String) -> String? {
        do {
            _ = try configuration(json)
            return nil
        } catch let error as SimulatorError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test func readsEverySection() throws {
        let token = String(repeating: "ab", count: 32)
        let other = String(repeating: "cd", count: 32)
        let config = try configuration(
            """
            {"host": "127.0.0.1", "port": 0, "environment": "production",
             "tls": {"hosts": ["localhost", "::1"]}, "caOut": "/tmp/x-ca.pem",
             "allowedBundles": ["com.example.app"],
             "devices": {"unregistered": ["\(token.uppercased())", {"token": "\(other)", "timestamp": 5}],
                         "bad": ["\(other)"], "owners": {"\(token)": "com.example.app"},
                         "unregisteredRate": 0.05, "badTokenRate": 0.01},
             "faults": {"failRate": 0.1, "failStatus": 429, "retryAfter": 7, "stallRate": 0.01, "dropRate": 0.02,
                        "latency": {"fixedMs": 5, "exponentialMeanMs": 2}, "handshakeMs": 250,
                        "goAwayAfterStreams": 100,
                        "maxConcurrentStreams": 8, "streamLimitAfterRefusedToken": 2,
                        "script": [{"request": 3, "action": "fail", "status": 500},
                                   {"stream": 5, "action": "goaway", "processThisStream": false},
                                   {"stream": 6, "action": "delay", "ms": 40},
                                   {"request": 9, "action": "maxConcurrentStreams", "value": 1},
                                   {"request": 10, "action": "stall"}, {"request": 11, "action": "drop"}]},
             "acceptedCapacity": 50, "seed": 99}
            """)
        #expect(config.environment == .production)
        #expect(config.tls == .generated(hosts: ["localhost", "::1"]))
        #expect(config.caOutputPath == "/tmp/x-ca.pem")
        #expect(config.allowedBundles == ["com.example.app"])
        let unregistered: [String: Int64?] = [token: nil, other: 5]
        #expect(config.devices.unregistered == unregistered)
        #expect(config.devices.badTokens == [other])
        #expect(config.devices.bundleByToken == [token: "com.example.app"])
        #expect(config.devices.unregisteredRate == 0.05 && config.devices.badTokenRate == 0.01)
        #expect(config.faults.failureRate == 0.1)
        #expect(config.faults.failure == .tooManyRequests(retryAfterSeconds: 7))
        #expect(config.faults.stallRate == 0.01 && config.faults.dropConnectionRate == 0.02)
        #expect(
            config.faults.latency
                == LatencyDistribution(fixedMilliseconds: 5, jitter: .exponential(meanMilliseconds: 2)))
        #expect(config.faults.handshakeMilliseconds == 250)
        #expect(config.faults.goAwayAfterStreams == 100)
        #expect(config.faults.maxConcurrentStreams == 8)
        #expect(config.faults.streamLimitAfterRefusedToken == 2)
        #expect(
            config.faults.script == [
                ScriptedFault(.request(3), .fail(.internalServerError())),
                ScriptedFault(.stream(5), .goAway(processThisStream: false)),
                ScriptedFault(.stream(6), .delay(milliseconds: 40)),
                ScriptedFault(.request(9), .setMaxConcurrentStreams(1)),
                ScriptedFault(.request(10), .stall),
                ScriptedFault(.request(11), .dropConnection),
            ])
        #expect(config.acceptedCapacity == 50 && config.seed == 99)
    }

    @Test func unknownKeysAreRefusedWithASuggestion() {
        let message = configurationError(#"{"faults": {"latnecy": {"fixedMs": 1}}}"#)
        #expect(message?.contains("faults.latnecy") == true)
        #expect(message?.contains("did you mean latency?") == true)
    }

    @Test func wrongValuesNameTheKeyAndWhatWouldBeRight() {
        #expect(configurationError(#"{"port": 70000}"#)?.contains("port: must be between 0 and 65535") == true)
        #expect(configurationError(#"{"faults": {"failStatus": 502}}"#)?.contains("429, 500 or 503") == true)
        #expect(configurationError(#"{"faults": {"failRate": 2}}"#)?.contains("failureRate") == true)
        #expect(configurationError(#"{"faults": {"handshakeMs": -5}}"#)?.contains("faults.handshakeMs") == true)
        #expect(
            configurationError(#"{"faults": {"streamLimitAfterRefusedToken": 0}}"#)?
                .contains("faults.streamLimitAfterRefusedToken") == true)
        #expect(configurationError(#"{"devices": {"bad": ["xyz"]}}"#)?.contains("devices.bad[0]") == true)
        #expect(configurationError(#"{"auth": {"mode": "token"}}"#)?.contains("auth.keys") == true)
        #expect(configurationError(#"{"auth": {"mode": "oauth"}}"#)?.contains("token, certificate or none") == true)
        #expect(
            configurationError(#"{"faults": {"script": [{"action": "stall"}]}}"#)?
                .contains("faults.script[0]") == true)
        #expect(
            configurationError(#"{"faults": {"script": [{"request": 1, "action": "explode"}]}}"#)?
                .contains("action") == true)
        #expect(configurationError(#"{"tls": {"certFile": "a.pem"}}"#)?.contains("certFile and keyFile") == true)
        #expect(configurationError(#"[]"#)?.contains("must be a JSON object") == true)
    }

    @Test func tokenAuthenticationReadsInlineKeys() throws {
        let key = try ProviderTokenKey.generate(keyID: "KEYAAAAAAA", teamID: "TEAM000001")
        var object = JSONObject()
        object.appendUnchecked("mode", "token")
        object.appendUnchecked(
            "keys",
            .array([
                .object([
                    "keyId": "KEYAAAAAAA", "publicKey": .string(key.publicKeyPEM), "teamId": "TEAM000001",
                ])
            ]))
        object.appendUnchecked("minUpdateIntervalSeconds", 0)
        let config = try SimulatorConfiguration(json: .object(["auth": .object(object)]))
        #expect(
            config.authentication
                == .providerToken(
                    keys: [
                        SimulatorProviderKey(keyID: "KEYAAAAAAA", publicKeyPEM: key.publicKeyPEM, teamID: "TEAM000001")
                    ],
                    maximumAgeSeconds: 3600, minimumUpdateIntervalSeconds: 0))
    }

    @Test func aMissingConfigurationFileIsNamed() {
        #expect(throws: SimulatorError.self) { try SimulatorConfiguration(contentsOfFile: "/nonexistent/sim.json") }
        do {
            _ = try SimulatorConfiguration(contentsOfFile: "/nonexistent/sim.json")
        } catch {
            #expect(error.message.contains("/nonexistent/sim.json"))
        }
    }
}

@Suite struct SimulatorLedgerTests {
    func record(_ n: Int) -> AcceptedNotification {
        AcceptedNotification(
            connectionID: 1, streamID: n, deviceToken: goodToken, apnsID: "id-\(n)", uniqueID: nil, pushType: .alert,
            topic: "com.example.app", keyID: nil, headers: [], payload: [], receivedAtMilliseconds: 0)
    }

    @Test func theRingKeepsTheNewestAndCountsWhatItDropped() {
        var ledger = SimulatorLedger(capacity: 3)
        for n in 1...5 { _ = ledger.record(record(n)) }
        #expect(ledger.accepted.map(\.streamID) == [3, 4, 5])
        #expect(ledger.stats.acceptedRecorded == 5)
        #expect(ledger.stats.acceptedDropped == 2)
        ledger.clearAccepted()
        #expect(ledger.accepted.isEmpty)
        _ = ledger.record(record(6))
        #expect(ledger.accepted.map(\.streamID) == [6])
    }

    @Test func answersAreCountedByStatusAndReasonFromTwoConnectionsTallies() {
        var ledger = SimulatorLedger(capacity: 0)
        var first = LedgerTally()
        first.acceptUnkept()
        first.acceptUnkept()
        first.count(ResponseKind(status: 410, reason: "Unregistered"))
        first.peakStreams = 3
        var second = LedgerTally()
        second.count(ResponseKind(status: 400, reason: "BadDeviceToken"))
        second.count(ResponseKind(status: 410, reason: "Unregistered"))
        second.requests += 1
        second.stalls += 1
        _ = ledger.add(first, connection: 1)
        _ = ledger.add(second, connection: 2)
        let stats = ledger.stats
        #expect(stats.requests == 6)
        #expect(stats.count(status: 200) == 2)
        #expect(stats.count(reason: "Unregistered") == 2)
        #expect(stats.count(status: 400) == 1)
        #expect(stats.stalledStreams == 1)
        #expect(stats.acceptedDropped == 2)
        #expect(stats.peakConcurrentStreams == [1: 3])
        #expect(stats.json["responses"]?["410 Unregistered"] == .int(2))
    }

    @Test func aTallysRecordsGoToTheRingInOrderAndPushOutTheOldest() {
        var ledger = SimulatorLedger(capacity: 2)
        var tally = LedgerTally()
        for stream in 1...3 { tally.accept(record(stream)) }
        let pushedOut = ledger.add(tally, connection: 1)
        #expect(pushedOut.map(\.streamID) == [1])
        #expect(ledger.accepted.map(\.streamID) == [2, 3])
        #expect(ledger.stats.requests == 3)
        #expect(ledger.stats.count(status: 200) == 3)
    }

    @Test func peakStreamsAreKeptPerConnectionAndBounded() {
        var ledger = SimulatorLedger(capacity: 0)
        ledger.peak(connection: 1, streams: 3)
        ledger.peak(connection: 1, streams: 2)
        ledger.peak(connection: 2, streams: 7)
        #expect(ledger.stats.peakConcurrentStreams == [1: 3, 2: 7])
        #expect(ledger.stats.maximumConcurrentStreams == 7)
        for connection in 3...(SimulatorLedger.peakConnectionsKept + 10) {
            ledger.peak(connection: connection, streams: 1)
        }
        #expect(ledger.stats.peakConcurrentStreams.count == SimulatorLedger.peakConnectionsKept)
        #expect(ledger.stats.peakConcurrentStreams[1] == nil)
    }
}
