// A credential APNs refuses stops its own app, not the others: through the whole worker (librdkafka's mock
// cluster, the simulator over TLS and HTTP/2), app A's key is refused while app B flows; A's records are
// parked on the retry topic, and once APNs takes A's key again every A push is delivered. Counted.

import APNs
import APNsSimulator
import Foundation
import JSON
import Kafka
import PushRules
import TestSupport
import Testing

@testable import Worker

@Suite("Parking pushes whose credential APNs refuses", .serialized)
struct ParkingTests {
    static let appA = "com.example.alpha"
    static let appB = "com.example.beta"

    static func simulatorConfiguration(
        trusting keys: [ProviderTokenKey], identity: SimulatorTLSIdentity,
        port: Int
    ) -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration()
        configuration.tls = identity
        configuration.port = port
        configuration.environment = .production
        configuration.authentication = .providerToken(
            keys: keys.map {
                SimulatorProviderKey(keyID: $0.keyID, publicKeyPEM: $0.publicKeyPEM, teamID: $0.teamID)
            })
        configuration.acceptedCapacity = 100_000
        return configuration
    }

    @Test func aRefusedKeyParksItsAppsRecordsWhileOtherAppsFlowAndDeliversThemOnceItWorks() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        for (topic, partitions) in [
            "push.requests": 4, "push.outcomes": 4, "push.invalid-tokens": 2, "push.dlq": 1,
            "push.retry": 2,
        ] {
            try cluster.createTopic(topic, partitions: partitions)
        }
        let keyA = try ProviderTokenKey.generate(keyID: "ALPHAKEY01", teamID: "TESTTEAM01")
        let keyB = try ProviderTokenKey.generate(keyID: "BETAKEY001", teamID: "TESTTEAM01")
        let identity = try APNsOutageTests.serverIdentity()
        // APNs has revoked A's key: only B's is trusted.
        let revoked = try APNsSimulator(Self.simulatorConfiguration(trusting: [keyB], identity: identity, port: 0))
        let port = try revoked.start()

        var document = JSONObject()
        document["kafka"] = [
            "brokers": .array(cluster.bootstrapServers.split(separator: ",").map { .string(String($0)) }),
            "group": "parking",
            "properties": [
                "session.timeout.ms": "6000", "heartbeat.interval.ms": "500",
                "partition.assignment.strategy": "range",
            ],
        ]
        document["credentials"] = [
            "ka": ["type": "token", "key_file": "(memory)", "key_id": .string(keyA.keyID), "team_id": "TESTTEAM01"],
            "kb": ["type": "token", "key_file": "(memory)", "key_id": .string(keyB.keyID), "team_id": "TESTTEAM01"],
        ]
        var apps = JSONObject()
        apps[Self.appA] = ["credential": "ka"]
        apps[Self.appB] = ["credential": "kb"]
        document["apps"] = .object(apps)
        document["apns"] = [
            "endpoints": ["production": .string(revoked.baseURL), "sandbox": .string(revoked.baseURL)],
            "ca_file": .string(revoked.caFilePath), "request_timeout": "5s",
        ]
        document["retry"] = ["park_delay": "500ms", "base_backoff": "5ms", "max_backoff": "50ms"]
        document["metrics"] = ["listen": "127.0.0.1:0"]
        let configuration = try WorkerConfiguration(decoding: .object(document))
        let metrics = try WorkerMetrics()
        let worker = try WorkerRuntime(
            configuration: configuration,
            rules: RulesStore(path: "test-rules.yaml", initial: try RuleSet(text: WorkerHarness.rules)),
            metrics: metrics,
            readiness: Readiness(), logger: Logger(writer: LogWriter(configuration: .init(level: .critical))),
            preloadedCredentials: [
                "ka": LoadedCredential(name: "ka", signer: try ProviderTokenSigner(key: keyA)),
                "kb": LoadedCredential(name: "kb", signer: try ProviderTokenSigner(key: keyB)),
            ])

        // 200 events, A and B alternating on the same partitions, two devices each.
        let producer = try KafkaTestSupport.producer(cluster)
        var expected: [String: Set<String>] = [Self.appA: [], Self.appB: []]
        for index in 0..<200 {
            let app = index % 2 == 0 ? Self.appA : Self.appB
            let tokens = (0..<2).map { String(format: "%064x", 0xB000 + index * 2 + $0) }
            let devices = tokens.map { #"{"token":"\#($0)","environment":"production"}"# }.joined(separator: ",")
            let value = #"{"id":"e\#(index)","type":"t","app":"\#(app)","devices":[\#(devices)]}"#
            try await producer.send(
                topic: "push.requests", key: Array("u\(index % 13)".utf8), value: Array(value.utf8),
                onDelivery: { _ in })
            for token in tokens { expected[app]!.insert("e\(index)/\(token)") }
        }
        try await producer.flush(timeout: .seconds(20))
        try await producer.close(timeout: .seconds(5))

        try await worker.start()
        // B flows while A's key is refused; A's records are parked, each at least once.
        let bDelivered = try await Self.outcomes(cluster, atLeast: 200) { $0.app == Self.appB }
        #expect(Set(bDelivered.map(\.pair)) == expected[Self.appB]!)
        #expect(bDelivered.allSatisfy { $0.status == "delivered" })
        #expect(
            await eventually(timeout: .seconds(60)) { worker.pipeline.counters.parked >= 100 },
            "every A record parked at least once")
        // Once refused, A's key is asked again by one push at a time, not by every push at every return from
        // the retry topic: while each A record is parked twice more (a park delay of 500 ms), APNs sees at
        // most the probes of that time (1 s, then 2 s apart), where it saw every A push again each time.
        let refusedKind = ResponseKind(status: 403, reason: "InvalidProviderToken")
        let refusedAfterFirstPark = revoked.stats.responses[refusedKind, default: 0]
        #expect(
            await eventually(timeout: .seconds(60)) { worker.pipeline.counters.parked >= 300 },
            "every A record parked three times")
        let refusedMeanwhile = revoked.stats.responses[refusedKind, default: 0] - refusedAfterFirstPark
        #expect(refusedMeanwhile <= 4, "A's pushes sent to APNs while its key was known to be refused")
        let exposition = String(decoding: metrics.registry.exposition(), as: UTF8.self)
        let parkedMetric = exposition.contains(#"apns_worker_records_parked_total{reason="InvalidProviderToken"}"#)
        #expect(parkedMetric)

        // APNs takes A's key again: the same server identity on the same port, trusting both keys.
        revoked.stop()
        let restored = try APNsSimulator(
            Self.simulatorConfiguration(
                trusting: [keyA, keyB], identity: identity,
                port: port))
        _ = try restored.start()
        let all = try await Self.outcomes(cluster, atLeast: 400) { _ in true }
        let aOutcomes = all.filter { $0.app == Self.appA }
        #expect(Set(aOutcomes.map(\.pair)) == expected[Self.appA]!, "every A pair has an outcome")
        #expect(aOutcomes.allSatisfy { $0.status == "delivered" }, "\(Set(aOutcomes.map(\.status)))")
        #expect(aOutcomes.count == 200, "one outcome per A pair: none was rejected before parking")
        let bAgain = Set(restored.accepted.map(\.deviceToken)).intersection(
            Set(expected[Self.appB]!.map { String($0.split(separator: "/")[1]) }))
        #expect(bAgain.isEmpty, "a push delivered before its record was parked is never sent again")
        print(
            "parking test: A \(aOutcomes.count) delivered after the key worked again, B \(bDelivered.count) "
                + "delivered meanwhile, \(worker.pipeline.counters.parked) parks, \(refusedAfterFirstPark) A pushes "
                + "refused before every A record was parked and \(refusedMeanwhile) while they were parked twice more")
        await worker.shutdown(timeout: 5)
        restored.stop()
        await cluster.stop()
    }

    struct Outcome {
        var pair: String
        var app: String
        var status: String
    }

    /// Reads the outcomes topic until it holds `count` outcomes; those that pass `filter`.
    static func outcomes(_ cluster: MockKafkaCluster, atLeast count: Int, _ filter: (Outcome) -> Bool)
        async throws -> [Outcome]
    {
        try await KafkaTestSupport.readAll(cluster, topic: "push.outcomes", count: count, timeout: .seconds(90))
            .compactMap { message -> Outcome? in
                guard let value = message.value, let outcome = try? JSONValue(parsing: value),
                    let event = outcome["event_id"]?.stringValue, let token = outcome["device_token"]?.stringValue,
                    let topic = outcome["topic"]?.stringValue, let status = outcome["status"]?.stringValue
                else { return nil }
                return Outcome(pair: "\(event)/\(token)", app: topic, status: status)
            }
            .filter(filter)
    }
}
