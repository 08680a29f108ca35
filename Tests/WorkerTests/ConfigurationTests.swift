import APNs
import Testing
@testable import Worker

@Suite struct ConfigurationTests {
    let minimal: JSONValue = [
        "version": 1,
        "kafka": ["brokers": "k1:9092"],
        "apps": [["bundle_id": "com.example.chat",
                  "credential": ["key_file": "/s/AuthKey.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ"]]],
        "rules": ["file": "/etc/apns-worker/rules.yaml"],
    ]

    @Test func minimalConfigurationTakesTheDocumentedDefaults() throws {
        let configuration = try WorkerConfiguration(decoding: minimal)
        #expect(configuration.kafka.brokers == "k1:9092")
        #expect(configuration.kafka.groupID == "apns-worker")
        #expect(configuration.kafka.requestsTopic == "push.requests")
        #expect(configuration.apps.first?.credential == .token(keyFile: "/s/AuthKey.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        #expect(configuration.pipeline.maxRecordsInFlight == 1000)
        #expect(configuration.apns.retry.maxAttempts == 5)
        #expect(configuration.observability.listen == "0.0.0.0:9090")
    }

    @Test func reportsEveryProblemAtOnceWithItsPath() {
        let document: JSONValue = [
            "kafka": ["brokerz": "x", "topics": ["requests": 5]],
            "apps": [["bundle_id": "a", "credential": ["type": "token", "key_file": "/k", "password": "hunter2"]]],
            "apns": ["request_timeout": "ten seconds", "connections_per_pool": 0],
            "pipeline": ["max_records_in_flight": 10, "resume_below": 10],
        ]
        #expect {
            _ = try WorkerConfiguration(decoding: document)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            let text = error.description
            return text.contains("kafka.brokerz: unknown key 'brokerz'; did you mean 'brokers'?")
                && text.contains("kafka.brokers: is required")
                && text.contains("apps[0].credential.key_id: is required")
                && text.contains("apps[0].credential.password: secrets are never written inline")
                && text.contains("apns.request_timeout: must be a duration")
                && text.contains("apns.connections_per_pool: must be between 1 and 64, found 0")
                && text.contains("pipeline.resume_below: must be below max_records_in_flight")
                && text.contains("rules: is required")
                && !text.contains("hunter2")
        }
    }

    @Test func environmentVariablesOverrideAnyKey() throws {
        var document = minimal
        let applied = EnvironmentOverrides.apply([
            "APNS_WORKER_KAFKA__BROKERS": "prod-1:9093,prod-2:9093",
            "APNS_WORKER_KAFKA__PROPERTIES__SASL_MECHANISM": "SCRAM-SHA-512",
            "APNS_WORKER_PIPELINE__MAX_RECORDS_IN_FLIGHT": "250",
            "APNS_WORKER_APPS__0__CREDENTIAL__KEY_ID": "ZZZ999YYYX",
            "APNS_WORKER_APNS__RETRY__BASE_BACKOFF": "50ms",
            "HOME": "/root",
        ], to: &document)
        #expect(applied.count == 5)
        let configuration = try WorkerConfiguration(decoding: document)
        #expect(configuration.kafka.brokers == "prod-1:9093,prod-2:9093")
        #expect(configuration.kafka.properties["sasl.mechanism"] == "SCRAM-SHA-512")
        #expect(configuration.pipeline.maxRecordsInFlight == 250)
        #expect(configuration.apps[0].credential == .token(keyFile: "/s/AuthKey.p8", keyID: "ZZZ999YYYX", teamID: "DEF123GHIJ"))
        #expect(abs(configuration.apns.retry.baseBackoff - 0.05) < 1e-9)
    }

    @Test(arguments: [("250ms", 0.25), ("10s", 10.0), ("5m", 300.0), ("1h", 3600.0), ("2.5", 2.5)])
    func parsesDurations(text: String, seconds: Double) {
        #expect(ConfigurationDecoder.parseDuration(text) == seconds)
    }
}
