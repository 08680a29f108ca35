// The worker's configuration: documented defaults, every problem reported with its path, environment
// overrides and the example files.

import APNs
import Foundation
import JSON
import PushRules
import Testing

@testable import Worker

@Suite struct ConfigurationTests {
    let minimal: JSONValue = [
        "kafka": ["brokers": ["k1:9092"]],
        "credentials": [
            "team-key": [
                "type": "token", "key_file": "/s/AuthKey.p8", "key_id": "ABC123DEFG",
                "team_id": "DEF123GHIJ",
            ]
        ],
        "apps": ["com.example.chat": ["credential": "team-key"]],
    ]

    @Test func minimalConfigurationTakesTheDocumentedDefaults() throws {
        let configuration = try WorkerConfiguration(decoding: minimal)
        #expect(configuration.kafka.brokers == ["k1:9092"])
        #expect(configuration.kafka.group == "apns-worker")
        #expect(configuration.kafka.requestsTopic == "push.requests")
        #expect(configuration.kafka.deadLetterTopic == "push.dlq")
        #expect(
            configuration.credentials["team-key"]
                == .token(keyFile: "/s/AuthKey.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        #expect(configuration.apps["com.example.chat"]?.credentialName(for: .sandbox) == "team-key")
        #expect(configuration.pipeline.maxInFlightRecords == 12000)
        #expect(configuration.retry.maxAttempts == 5)
        #expect(configuration.retry.baseBackoff == 0.25)
        #expect(configuration.apns.connections == 2)
        #expect(configuration.apns.maxConnections == 24)
        #expect(configuration.drainTimeout == 25)
        #expect(configuration.rulesFile == "/etc/apns-worker/rules.yaml")
        #expect(configuration.metricsListen == "0.0.0.0:9090")
    }

    @Test func reportsEveryProblemAtOnceWithItsPath() {
        let document: JSONValue = [
            "kafka": ["brokerz": "x", "topics": ["requests": 5], "properties": ["sasl.password": "hunter2"]],
            "credentials": ["team-key": ["type": "token", "key_file": "/k", "key_id": "short", "password": "hunter2"]],
            "apps": ["com.example.chat": ["credential": "team-kee"]],
            "apns": ["request_timeout": "ten seconds", "connections": 0],
            "pipeline": ["max_in_flight_records": 10, "resume_below": 10],
            "log": ["level": "loud"],
        ]
        #expect {
            _ = try WorkerConfiguration(decoding: document)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            let text = error.description
            let expected = [
                "kafka.brokerz: unknown key 'brokerz'; did you mean 'brokers'?",
                "kafka.brokers: is required",
                "kafka.properties.sasl.password: secrets are never written in the config",
                "credentials.team-key.team_id: is required",
                "credentials.team-key.key_id: must be the 10-character Key ID",
                "credentials.team-key.password: secrets are never written inline",
                "apps.com.example.chat.credential: names 'team-kee', which is not under credentials; known: team-key",
                "apns.request_timeout: must be a duration",
                "apns.connections: must be between 1 and 64, found 0",
                "pipeline.resume_below: must be below max_in_flight_records",
                "log.level: must be one of",
            ]
            let missing = expected.filter { !text.contains($0) }
            return missing.isEmpty && !text.contains("hunter2")
        }
    }

    @Test func unsignedOAuthBearerTokensAreRefusedWithTheWayToRealOnes() throws {
        func document(unsecuredTokens: String) -> JSONValue {
            [
                "kafka": [
                    "brokers": ["k1:9092"],
                    "properties": [
                        "sasl.mechanism": "OAUTHBEARER",
                        "enable.sasl.oauthbearer.unsecure.jwt": .string(unsecuredTokens),
                    ],
                ],
                "credentials": minimal["credentials"]!, "apps": minimal["apps"]!,
            ]
        }
        #expect {
            _ = try WorkerConfiguration(decoding: document(unsecuredTokens: "true"))
        } throws: { error in
            let text = (error as? ConfigurationError)?.description ?? ""
            return text.contains("kafka.properties.enable.sasl.oauthbearer.unsecure.jwt: unsigned OAUTHBEARER tokens")
                && text.contains("sasl.oauthbearer.method: oidc")
        }
        _ = try WorkerConfiguration(decoding: document(unsecuredTokens: "false"))
    }

    @Test func environmentVariablesOverrideAnyKey() throws {
        var document = minimal
        let applied = EnvironmentOverrides.apply(
            [
                "APNS_WORKER_KAFKA__BROKERS": #"["prod-1:9093","prod-2:9093"]"#,
                "APNS_WORKER_KAFKA__PROPERTIES__SASL_MECHANISM": "SCRAM-SHA-512",
                "APNS_WORKER_KAFKA__GROUP_INSTANCE_ID": "apns-worker-3",
                "APNS_WORKER_PIPELINE__MAX_IN_FLIGHT_RECORDS": "250",
                "APNS_WORKER_RETRY__BASE_BACKOFF": "50ms",
                "HOME": "/root",
                // Kubernetes service links for a Service named apns-worker-metrics: not configuration.
                "APNS_WORKER_METRICS_PORT": "tcp://10.0.0.7:9090",
                "APNS_WORKER_METRICS_SERVICE_HOST": "10.0.0.7",
            ], to: &document)
        #expect(applied.count == 5)
        let configuration = try WorkerConfiguration(decoding: document)
        #expect(configuration.kafka.brokers == ["prod-1:9093", "prod-2:9093"])
        #expect(configuration.kafka.properties["sasl.mechanism"] == "SCRAM-SHA-512")
        #expect(configuration.kafka.groupInstanceID == "apns-worker-3")
        #expect(configuration.pipeline.maxInFlightRecords == 250)
        #expect(abs(configuration.retry.baseBackoff - 0.05) < 1e-9)
    }

    @Test(arguments: [("250ms", 0.25), ("10s", 10.0), ("5m", 300.0), ("1h", 3600.0), ("2.5s", 2.5), ("1.5m", 90.0)])
    func parsesDurations(text: String, seconds: Double) {
        #expect(ConfigurationDecoder.parseDuration(text) == seconds)
    }

    /// What schemas/defs/common.json's duration pattern refuses, the worker refuses too.
    @Test(arguments: ["30", "2.5", "1e2s", ".5s", "5.s", "-1s", "+1s", "10 s", "s", "1.2.3s", "10sec", ""])
    func refusesWhatTheSchemaRefuses(text: String) {
        #expect(ConfigurationDecoder.parseDuration(text) == nil)
    }
}

@Suite struct ConfigurationLoaderTests {
    @Test func problemsPointAtFileLineAndColumn() {
        let yaml = """
            kafka:
              brokers: [k1:9092]
              grup: apns-worker
            credentials:
              team-key: {type: token, key_file: /k.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ}
            apps:
              com.example.chat:
                credential: teamkey
            """
        #expect {
            _ = try ConfigurationLoader.load(bytes: Array(yaml.utf8), file: "worker.yaml", environment: [:])
        } throws: { error in
            let text = "\(error)"
            return text.contains("worker.yaml:3:3: kafka.grup: unknown key 'grup'; did you mean 'group'?")
                && text.contains("worker.yaml:8:5: apps.com.example.chat.credential: names 'teamkey'")
        }
    }

    @Test func missingFilesAreReportedWithTheOtherProblems() {
        let yaml = """
            kafka: {brokers: [k1:9092], property_files: {sasl.password: /nonexistent/sasl}}
            credentials:
              team-key: {type: token, key_file: /nonexistent/AuthKey.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ}
            apps: {com.example.chat: {credential: team-key}}
            rules: {file: /nonexistent/rules.yaml}
            """
        #expect {
            _ = try ConfigurationLoader.load(bytes: Array(yaml.utf8), file: "w.yaml", environment: [:])
        } throws: { error in
            let text = "\(error)"
            return text.contains(
                "w.yaml:3:27: credentials.team-key.key_file: file not found at '/nonexistent/AuthKey.p8'")
                && text.contains("kafka.property_files.sasl.password: file not found")
                && text.contains("w.yaml:5:9: rules.file: file not found")
        }
    }

    @Test func problemsFromEnvironmentVariablesNameTheVariable() {
        let yaml = """
            kafka: {brokers: [k1:9092]}
            credentials: {team-key: {type: token, key_file: /k.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
            apps: {com.example.chat: {credential: team-key}}
            """
        #expect {
            _ = try ConfigurationLoader.load(
                bytes: Array(yaml.utf8), file: "worker.yaml", environment: ["APNS_WORKER_APNS__CONNECTIONS": "0"])
        } throws: { error in
            "\(error)".contains(
                "environment variable APNS_WORKER_APNS__CONNECTIONS: apns.connections: must be between 1 and 64")
        }
    }

    @Test func anOverrideThatMatchesNoSectionIsAProblemNamingTheVariable() {
        let yaml = """
            kafka: {brokers: [k1:9092]}
            credentials: {team-key: {type: token, key_file: /k.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
            apps: {com.example.chat: {credential: team-key}}
            """
        let environment = [
            "APNS_WORKER_KAFAK__GROUP": "x",
            // Kubernetes service links have no double underscore: not overrides, not problems.
            "APNS_WORKER_METRICS_PORT": "tcp://10.0.0.7:9090",
        ]
        #expect {
            _ = try ConfigurationLoader.load(bytes: Array(yaml.utf8), file: "worker.yaml", environment: environment)
        } throws: { error in
            let text = "\(error)"
            return text.contains(
                "environment variable APNS_WORKER_KAFAK__GROUP: overrides 'kafak.group', but 'kafak' is no section "
                    + "of the configuration (did you mean 'kafka'?); the sections are apns, apps, credentials")
                && !text.contains("APNS_WORKER_METRICS_PORT")
        }
        #expect(EnvironmentOverrides.unmatched(["APNS_WORKER_METRICS_SERVICE_HOST": "10.0.0.7"]).isEmpty)
        #expect(EnvironmentOverrides.unmatched(["APNS_WORKER_KAFKA__GROUP": "g"]).isEmpty)
    }

    @Test func aDurationNeedsItsUnitAsTheSchemaSays() {
        let yaml = """
            kafka: {brokers: [k1:9092]}
            credentials: {team-key: {type: token, key_file: /k.p8, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
            apps: {com.example.chat: {credential: team-key}}
            shutdown: {drain_timeout: 30}
            """
        #expect {
            _ = try ConfigurationLoader.load(bytes: Array(yaml.utf8), file: "worker.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains(
                "worker.yaml:4:12: shutdown.drain_timeout: must be a duration with its unit, like 30s or 30ms, "
                    + "found the bare number 30")
        }
    }

    @Test func syntaxErrorsHaveTheirPosition() {
        #expect {
            _ = try ConfigurationLoader.load(
                bytes: Array("kafka:\n  brokers: [a\n".utf8), file: "w.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains("w.yaml:") && "\(error)".contains("not valid YAML")
        }
    }

    @Test func theExampleConfigurationsInSchemasLoad() throws {
        for name in ["worker-config.minimal.yaml", "worker-config.production.yaml", "worker-config.simulator.yaml"] {
            let path = #filePath.replacingOccurrences(
                of: "Tests/WorkerTests/ConfigurationTests.swift", with: "schemas/examples/" + name)
            // The examples name files of a real deployment, so their existence is not checked here.
            let data = try #require(FileManager.default.contents(atPath: path))
            _ = try WorkerConfiguration(decoding: YAMLDocument(bytes: Array(data)).value)
        }
    }
}
