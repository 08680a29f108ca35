// Credentials as `run` loads them: an encrypted .p8 or a .p12 with its password from a file or the
// environment, and every credential that does not load reported at the key naming its file, with the
// file, what is wrong and what would be right. Keys are made with the openssl tool at test time.

import APNs
import Foundation
import JSON
import Kafka
import TestSupport
import Testing

@testable import Worker

final class CredentialFiles: Sendable {
    let directory = TemporaryDirectory(prefix: "apns-worker-creds")
    static let keyPassword = "key-secret-42"
    static let archivePassword = "p12-secret-99"

    init() throws {
        func openssl(_ arguments: [String]) throws {
            try runProcessOutput("/usr/bin/openssl", arguments, in: directory.path)
        }
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey.p8"])
        try openssl([
            "pkcs8", "-topk8", "-in", "AuthKey.p8", "-v2", "aes-256-cbc", "-passout", "pass:\(Self.keyPassword)",
            "-out", "encrypted.p8",
        ])
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "push.key",
            "-out", "push.pem", "-days", "30", "-subj",
            "/UID=com.example.chat/CN=Apple Push Services: com.example.chat",
        ])
        try openssl([
            "pkcs12", "-export", "-in", "push.pem", "-inkey", "push.key", "-passout", "pass:\(Self.archivePassword)",
            "-out", "push.p12",
        ])
        directory.write("key.pass", Self.keyPassword + "\n")
        directory.write("wrong.pass", "not-the-secret-77\n")
        directory.write("notes.txt", "these are notes, not a key\n")
    }

    func file(_ name: String) -> String { directory.file(name) }

    /// worker.yaml with one credential, `entry` (flow style, on line 3), used by one app.
    func configuration(_ entry: String) -> String {
        """
        kafka: {brokers: [k1:9092]}
        credentials:
          push: \(entry)
        apps: {com.example.chat: {credential: push}}
        rules: {file: \(file("notes.txt"))}
        """
    }

    func load(_ entry: String, environment: [String: String] = [:]) throws -> Result<
        [String: LoadedCredential], ConfigurationError
    > {
        let text = configuration(entry)
        let loaded = try ConfigurationLoader.load(
            bytes: Array(text.utf8), file: "worker.yaml", environment: environment)
        do throws(ConfigurationError) {
            return .success(try CredentialClients.load(loaded.configuration, environment: environment))
        } catch {
            return .failure(loaded.source.locate(error))
        }
    }

    func token(_ keyFile: String, passwordFile: String? = nil) -> String {
        "{type: token, key_file: \(file(keyFile)), key_id: ABC123DEFG, team_id: DEF123GHIJ"
            + (passwordFile.map { ", key_password_file: \(file($0))" } ?? "") + "}"
    }
}

@Suite struct CredentialLoadingTests {
    let files: CredentialFiles
    init() throws { files = try CredentialFiles() }

    func problems(_ result: Result<[String: LoadedCredential], ConfigurationError>) -> [String] {
        guard case .failure(let error) = result else { return [] }
        return error.problems.map(\.description)
    }

    /// The column where the value of `key` starts on line 3 (the credential's line).
    func column(of key: String, in entry: String) -> Int {
        let line = "  push: " + entry
        return line.distance(from: line.startIndex, to: line.range(of: key + ":")!.lowerBound) + 1
    }

    @Test func anEncryptedKeyOpensWithItsPasswordFile() throws {
        let result = try files.load(files.token("encrypted.p8", passwordFile: "key.pass"))
        let credentials = try result.get()
        #expect(try credentials["push"]?.signer?.token().keyID == "ABC123DEFG")
    }

    @Test func anEncryptedKeyOpensWithThePasswordFromTheEnvironment() throws {
        let result = try files.load(
            files.token("encrypted.p8"), environment: ["APNS_KEY_PASSWORD": CredentialFiles.keyPassword])
        #expect(try result.get()["push"]?.signer != nil)
    }

    @Test func aPasswordFileWinsOverTheEnvironment() throws {
        let result = try files.load(
            files.token("encrypted.p8", passwordFile: "key.pass"), environment: ["APNS_KEY_PASSWORD": "wrong"])
        #expect(try result.get()["push"]?.signer != nil)
    }

    @Test func aWrongPasswordFromTheEnvironmentIsPlacedAtTheKeyFileAndNamesTheVariable() throws {
        let entry = files.token("encrypted.p8")
        let found = problems(try files.load(entry, environment: ["APNS_KEY_PASSWORD": "not-the-secret-77"]))
        let position = "worker.yaml:3:\(column(of: "key_file", in: entry))"
        #expect(
            found == [
                "\(position): credentials.push.key_file: '\(files.file("encrypted.p8"))' does not open with the "
                    + "password from the environment variable APNS_KEY_PASSWORD: the password is wrong; set "
                    + "APNS_KEY_PASSWORD to the password the file was encrypted with"
            ])
        #expect(!found.joined().contains("not-the-secret-77"))
    }

    @Test func aWrongPasswordFileIsPlacedAtTheKeyNamingIt() throws {
        let entry = files.token("encrypted.p8", passwordFile: "wrong.pass")
        let found = problems(try files.load(entry))
        let position = "worker.yaml:3:\(column(of: "key_password_file", in: entry))"
        #expect(found.count == 1)
        #expect(
            found.first?.hasPrefix(
                "\(position): credentials.push.key_password_file: '\(files.file("encrypted.p8"))' does not open "
                    + "with the password from the password file '\(files.file("wrong.pass"))' (key_password_file): "
                    + "the password is wrong; write the password the file was encrypted with on the first line of "
                    + "'\(files.file("wrong.pass"))'") == true)
    }

    @Test func anEncryptedKeyWithoutAPasswordSaysWhereToGiveIt() throws {
        let entry = files.token("encrypted.p8")
        let found = problems(try files.load(entry))
        #expect(
            found == [
                "worker.yaml:3:\(column(of: "key_file", in: entry)): credentials.push.key_file: "
                    + "'\(files.file("encrypted.p8"))' is encrypted and no password was given; name a file holding "
                    + "its password with key_password_file (or set APNS_KEY_PASSWORD), or decrypt the key once "
                    + "with 'openssl pkey -in KEY -out KEY.decrypted'"
            ])
    }

    @Test func aFileThatIsNoKeyIsReportedWholeThroughTheRedaction() throws {
        let entry = files.token("notes.txt")
        let found = problems(try files.load(entry))
        #expect(found.count == 1)
        let line = LogRedaction.scrub(found[0])
        #expect(line == found[0])
        #expect(
            line.hasSuffix(
                "credentials.push.key_file: '\(files.file("notes.txt"))' is not PEM: no '-----BEGIN PRIVATE KEY-----' "
                    + "line found; check that this is the right file"))
    }

    @Test func anArchiveOpensWithThePasswordFromTheEnvironment() throws {
        let entry = "{type: certificate, cert_file: \(files.file("push.p12"))}"
        let result = try files.load(entry, environment: ["APNS_CERT_PASSWORD": CredentialFiles.archivePassword])
        #expect(try result.get()["push"]?.identity?.topics == ["com.example.chat"])
        let found = problems(try files.load(entry))
        #expect(found.count == 1)
        #expect(
            found.first?.contains(
                "credentials.push.cert_file: '\(files.file("push.p12"))' is encrypted and no password was given; "
                    + "name a file holding its password with password_file (or set APNS_CERT_PASSWORD)") == true)
    }

    @Test func anUnprotectedArchiveStillOpensWhenTheEnvironmentHasAPasswordForOthers() throws {
        try runProcessOutput(
            "/usr/bin/openssl",
            [
                "pkcs12", "-export", "-in", "push.pem", "-inkey", "push.key", "-passout", "pass:", "-out", "open.p12",
            ], in: files.directory.path)
        let entry = "{type: certificate, cert_file: \(files.file("open.p12"))}"
        let result = try files.load(entry, environment: ["APNS_CERT_PASSWORD": CredentialFiles.archivePassword])
        #expect(try result.get()["push"]?.identity != nil)
    }

    @Test func aKeyFileSetByAVariableIsBlamedOnTheVariable() throws {
        let variable = "APNS_WORKER_CREDENTIALS__PUSH__KEY_FILE"
        let found = problems(
            try files.load(files.token("AuthKey.p8"), environment: [variable: files.file("notes.txt")]))
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix("environment variable \(variable): credentials.push.key_file: '") == true)
    }
}

@Suite struct ConfigurationErrorPlacementTests {
    let yaml = """
        kafka:
          brokers: [k1:9092]
          properties:
            sasl.mechanismz: PLAIN
            linger.ms: soon
        credentials: {team-key: {type: token, key_file: /dev/null, key_id: ABC123DEFG, team_id: DEF123GHIJ}}
        apps: {com.example.chat: {credential: team-key}}
        """

    @Test func propertiesLibrdkafkaRefusesAreEachPlacedAtTheirKey() throws {
        let document = try ConfigurationLoader.load(bytes: Array(yaml.utf8), file: "worker.yaml", environment: [:])
        let configuration = document.configuration
        let failure: KafkaError
        do {
            _ = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    client: KafkaConfiguration(
                        bootstrapServers: "127.0.0.1:9", properties: configuration.kafka.properties)))
            Issue.record("librdkafka accepted unknown properties")
            return
        } catch {
            failure = error
        }
        let error = try #require(ConfigurationError(startupFailure: failure, kafka: configuration.kafka))
        let lines = document.source.locate(error).problems.map(\.description)
        #expect(lines.count == 2)
        #expect(
            lines.contains {
                $0.hasPrefix("worker.yaml:5:5: kafka.properties.linger.ms: librdkafka refuses it: ")
                    && $0.hasSuffix("; see librdkafka's CONFIGURATION.md for the properties and their values")
            })
        #expect(
            lines.contains {
                $0.hasPrefix("worker.yaml:4:5: kafka.properties.sasl.mechanismz: librdkafka refuses it: ")
                    && $0.contains("No such configuration property")
            })
    }

    @Test func aSecretPropertySetByAVariableIsBlamedOnTheVariable() {
        let variable = "APNS_WORKER_KAFKA__PROPERTIES__SASL_PASSWORD"
        #expect {
            _ = try ConfigurationLoader.load(
                bytes: Array(yaml.utf8), file: "base.yaml", environment: [variable: "hunter2"])
        } throws: { error in
            let text = "\(error)"
            return text.contains(
                "environment variable \(variable): kafka.properties.sasl.password: secrets are never written")
                && !text.contains("base.yaml:1:1") && !text.contains("hunter2")
        }
    }

    @Test func anUnknownCredentialKeyNeverOffersAnInlineSecretKey() {
        let document: JSONValue = [
            "kafka": ["brokers": ["k1:9092"]],
            "credentials": [
                "team-key": [
                    "type": "token", "key_file": "/k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ",
                    "colour": "blue", "passwrd": "x", "password": "hunter2",
                ]
            ],
            "apps": ["com.example.chat": ["credential": "team-key"]],
        ]
        #expect {
            _ = try WorkerConfiguration(decoding: document)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            let lines = error.problems.map(\.description)
            let colour = lines.first { $0.hasPrefix("credentials.team-key.colour:") } ?? ""
            return colour
                == "credentials.team-key.colour: unknown key 'colour'; known keys: type, key_file, key_id, team_id, "
                + "key_password_file"
                && !lines.contains { $0.contains("did you mean 'password'") }
                && !lines.contains { $0.hasPrefix("credentials.team-key.password: unknown key") }
                && lines.contains {
                    $0.hasPrefix("credentials.team-key.password: secrets are never written inline")
                }
        }
    }

    @Test func aTokenCredentialTakesAKeyPasswordFile() throws {
        let document: JSONValue = [
            "kafka": ["brokers": ["k1:9092"]],
            "credentials": [
                "team-key": [
                    "type": "token", "key_file": "/k.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ",
                    "key_password_file": "/run/secrets/key.pass",
                ]
            ],
            "apps": ["com.example.chat": ["credential": "team-key"]],
        ]
        let configuration = try WorkerConfiguration(decoding: document)
        #expect(
            configuration.credentials["team-key"]
                == .token(
                    keyFile: "/k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ",
                    keyPasswordFile: "/run/secrets/key.pass"))
    }
}
