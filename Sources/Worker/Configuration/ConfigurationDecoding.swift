// Turns the parsed worker.yaml (after environment overrides) into WorkerConfiguration, collecting
// every problem with the key path where it is and what would be right.

import APNs
import Foundation
public import JSON

/// One problem in the configuration: where (a key path such as `kafka.topics.requests`, and the
/// file position when known) and what is wrong.
public struct ConfigurationProblem: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String
    /// `file:line:column`, filled in by the loader when the YAML position is known.
    public var location: String?

    public init(path: String, message: String, location: String? = nil) {
        self.path = path
        self.message = message
        self.location = location
    }

    /// `worker.yaml:12:5: credentials.team-key.key_file: what is wrong; what would be right`.
    public var description: String {
        (location.map { $0 + ": " } ?? "") + (path.isEmpty ? "" : path + ": ") + message
    }
}

/// A configuration that cannot be used; lists every problem.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]

    public init(problems: [ConfigurationProblem]) { self.problems = problems }
    public var description: String {
        "the configuration has \(problems.count) problem\(problems.count == 1 ? "" : "s"):\n"
            + problems.map { "  " + $0.description }.joined(separator: "\n")
    }
}

struct ConfigurationDecoder {
    var problems: [ConfigurationProblem] = []
    var checksFiles = false

    /// Reports a file the worker will read that is not there.
    mutating func checkFile(_ path: String?, at keyPath: String) {
        guard checksFiles, let path, !FileManager.default.fileExists(atPath: path) else { return }
        problem(
            keyPath, "file not found at '\(path)'; check the path (relative paths start from the current directory)")
    }

    mutating func problem(_ path: String, _ message: String) {
        problems.append(ConfigurationProblem(path: path, message: message))
    }

    /// Reports keys of `object` not in `known`, suggesting the closest known one. Keys in
    /// `reportedElsewhere` (the inline secrets, refused with their own message) are neither reported here
    /// nor offered as what would be right.
    mutating func checkKeys(_ object: JSONObject, at path: String, known: [String], reportedElsewhere: [String] = []) {
        for key in object.keys where !known.contains(key) && !reportedElsewhere.contains(key) {
            let hint =
                Spelling.closest(to: key, among: known).map { "; did you mean '\($0)'?" } ?? "; known keys: "
                + known.joined(separator: ", ")
            problem(join(path, key), "unknown key '\(key)'\(hint)")
        }
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : path + "." + key }

    mutating func object(_ value: JSONValue?, _ path: String) -> JSONObject? {
        guard let value, !value.isNull else { return nil }
        guard let object = value.objectValue else {
            problem(path, "must be a mapping, found \(value.typeName)")
            return nil
        }
        return object
    }

    mutating func string(
        _ object: JSONObject, _ key: String, _ path: String, required: Bool = false, allowEmpty: Bool = false
    ) -> String? {
        guard let value = object[key], !value.isNull else {
            if required { problem(join(path, key), "is required") }
            return nil
        }
        switch value {
        case .string(let text):
            if text.isEmpty && !allowEmpty { problem(join(path, key), "must not be empty") }
            return text
        case .int, .double, .bool:
            // A scalar YAML resolved to a number or boolean is still usable as text (e.g. a port).
            return value.compactString
        default:
            problem(join(path, key), "must be a string, found \(value.typeName)")
            return nil
        }
    }

    mutating func integer(_ object: JSONObject, _ key: String, _ path: String, range: ClosedRange<Int>) -> Int? {
        guard let value = object[key], !value.isNull else { return nil }
        var number: Int?
        if let integer = value.intValue { number = Int(integer) }
        if let text = value.stringValue { number = Int(text) }
        guard let number else {
            problem(join(path, key), "must be a whole number, found \(value.typeName)")
            return nil
        }
        guard range.contains(number) else {
            problem(join(path, key), "must be between \(range.lowerBound) and \(range.upperBound), found \(number)")
            return nil
        }
        return number
    }

    mutating func bool(_ object: JSONObject, _ key: String, _ path: String) -> Bool? {
        guard let value = object[key], !value.isNull else { return nil }
        if let flag = value.boolValue { return flag }
        if let text = value.stringValue?.lowercased(), ["true", "false"].contains(text) { return text == "true" }
        problem(join(path, key), "must be true or false, found \(value.typeName)")
        return nil
    }

    /// A duration: a number with its unit, `250ms`, `10s`, `1.5m`, `1h`, as the schema says. A bare number
    /// is refused: `30` could mean seconds or milliseconds, and a wrong guess is off by a thousand.
    mutating func duration(_ object: JSONObject, _ key: String, _ path: String, range: ClosedRange<Double>) -> Double? {
        guard let value = object[key], !value.isNull else { return nil }
        if value.doubleValue != nil {
            let shown = value.compactString.prefix(40)
            problem(
                join(path, key),
                "must be a duration with its unit, like \(shown)s or \(shown)ms, found the bare number \(shown)")
            return nil
        }
        var seconds: Double?
        if let text = value.stringValue { seconds = Self.parseDuration(text) }
        guard let seconds else {
            problem(
                join(path, key), "must be a duration like 250ms, 10s, 5m or 1h, found \(value.compactString.prefix(40))"
            )
            return nil
        }
        guard range.contains(seconds) else {
            problem(join(path, key), "must be between \(range.lowerBound)s and \(range.upperBound)s, found \(seconds)s")
            return nil
        }
        return seconds
    }

    /// Exactly the schema's pattern, `^[0-9]+(\.[0-9]+)?(ms|s|m|h)$`: no bare number, no exponent, no
    /// sign, no leading or trailing dot, so that what the schema refuses the worker refuses too.
    static func parseDuration(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        guard let (suffix, scale) = units.first(where: { text.hasSuffix($0.0) }) else { return nil }
        let number = text.dropLast(suffix.count)
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let digitsOnly = { (part: Substring) in !part.isEmpty && part.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard parts.allSatisfy(digitsOnly), let value = Double(number) else { return nil }
        return value * scale
    }

    mutating func stringMap(_ object: JSONObject, _ key: String, _ path: String) -> [String: String] {
        guard let map = self.object(object[key], join(path, key)) else { return [:] }
        var result: [String: String] = [:]
        for member in map {
            switch member.value {
            case .string(let text): result[member.key] = text
            case .int, .double, .bool: result[member.key] = member.value.compactString
            default: problem(join(join(path, key), member.key), "must be a string, number or boolean")
            }
        }
        return result
    }
}

extension WorkerConfiguration {
    /// Decodes a parsed configuration document (schemas/worker-config.schema.json). Throws every
    /// problem found at once.
    ///
    /// - Parameter checkingFiles: also report credential, CA and property files that do not exist,
    ///   with the other problems (the loader does; configurations made in memory need not).
    public init(decoding document: JSONValue, checkingFiles: Bool = false) throws(ConfigurationError) {
        var decoder = ConfigurationDecoder()
        decoder.checksFiles = checkingFiles
        guard let root = document.objectValue else {
            throw ConfigurationError(problems: [
                ConfigurationProblem(
                    path: "", message: "the configuration must be a mapping, found \(document.typeName)")
            ])
        }
        decoder.checkKeys(
            root, at: "",
            known: ["kafka", "credentials", "apps", "apns", "pipeline", "retry", "shutdown", "rules", "metrics", "log"])

        // kafka
        var kafka = Kafka(brokers: [])
        if let object = decoder.object(root["kafka"], "kafka") {
            decoder.checkKeys(
                object, at: "kafka",
                known: [
                    "brokers", "group", "group_instance_id", "commit_interval", "commit_after_records", "topics",
                    "properties", "property_files", "exactly_once", "transaction_interval",
                    "stranded_partition_after",
                ])
            switch object["brokers"] {
            case .array(let list)?:
                for (index, item) in list.enumerated() {
                    guard let broker = item.stringValue, Self.isHostPort(broker) else {
                        decoder.problem("kafka.brokers[\(index)]", "must be host:port such as kafka-0:9092")
                        continue
                    }
                    kafka.brokers.append(broker)
                }
            case .string(let text)?:
                kafka.brokers = text.split(separator: ",").map { String($0) }
            case nil, .null?:
                decoder.problem("kafka.brokers", "is required: a list of host:port bootstrap servers")
            case let other?:
                decoder.problem("kafka.brokers", "must be a list of host:port, found \(other.typeName)")
            }
            if kafka.brokers.isEmpty && object["brokers"] != nil {
                decoder.problem("kafka.brokers", "must name at least one broker")
            }
            kafka.group = decoder.string(object, "group", "kafka") ?? kafka.group
            kafka.groupInstanceID = decoder.string(object, "group_instance_id", "kafka", allowEmpty: true) ?? ""
            kafka.commitInterval =
                decoder.duration(object, "commit_interval", "kafka", range: 0...60) ?? kafka.commitInterval
            kafka.commitAfterRecords = decoder.integer(object, "commit_after_records", "kafka", range: 1...1_000_000)
            kafka.exactlyOnce = decoder.bool(object, "exactly_once", "kafka") ?? kafka.exactlyOnce
            kafka.transactionInterval =
                decoder.duration(object, "transaction_interval", "kafka", range: 0.001...60)
                ?? kafka.transactionInterval
            kafka.strandedPartitionAfter =
                decoder.duration(object, "stranded_partition_after", "kafka", range: 0...3600)
                ?? kafka.strandedPartitionAfter
            if let topics = decoder.object(object["topics"], "kafka.topics") {
                decoder.checkKeys(
                    topics, at: "kafka.topics", known: ["requests", "outcomes", "invalid_tokens", "dlq", "retry"])
                kafka.requestsTopic = decoder.string(topics, "requests", "kafka.topics") ?? kafka.requestsTopic
                kafka.outcomesTopic = decoder.string(topics, "outcomes", "kafka.topics") ?? kafka.outcomesTopic
                kafka.invalidTokensTopic =
                    decoder.string(topics, "invalid_tokens", "kafka.topics") ?? kafka.invalidTokensTopic
                kafka.deadLetterTopic = decoder.string(topics, "dlq", "kafka.topics") ?? kafka.deadLetterTopic
                kafka.retryTopic = decoder.string(topics, "retry", "kafka.topics") ?? kafka.retryTopic
            }
            kafka.properties = decoder.stringMap(object, "properties", "kafka")
            for name in kafka.properties.keys.sorted() {
                if Self.isSecretProperty(name) {
                    decoder.problem(
                        "kafka.properties." + name,
                        "secrets are never written in the config; put the value in a file and name it under kafka.property_files"
                    )
                } else if Self.ownedProperties.contains(name) {
                    decoder.problem("kafka.properties." + name, "is set by the worker itself and cannot be overridden")
                } else if name == "enable.sasl.oauthbearer.unsecure.jwt", kafka.properties[name] != "false" {
                    decoder.problem("kafka.properties." + name, Self.unsecuredTokensProblem)
                }
            }
            kafka.propertyFiles = decoder.stringMap(object, "property_files", "kafka")
            for (name, file) in kafka.propertyFiles.sorted(by: { $0.key < $1.key }) {
                decoder.checkFile(file, at: "kafka.property_files." + name)
            }
        } else {
            decoder.problem("kafka", "is required: at least kafka.brokers")
        }

        let credentials = decoder.credentials(root["credentials"])

        // apps
        var apps: [String: App] = [:]
        if let object = decoder.object(root["apps"], "apps"), !object.isEmpty {
            for member in object {
                let path = "apps." + member.key
                guard let app = decoder.object(member.value, path) else { continue }
                decoder.checkKeys(app, at: path, known: ["credential", "sandbox_credential"])
                let credential = decoder.string(app, "credential", path, required: true)
                let sandbox = decoder.string(app, "sandbox_credential", path)
                for (name, key) in [(credential, "credential"), (sandbox, "sandbox_credential")] {
                    if let name, credentials[name] == nil, root["credentials"]?[name] == nil {
                        let known = root["credentials"]?.objectValue?.keys.sorted() ?? []
                        decoder.problem(
                            path + "." + key,
                            "names '\(name)', which is not under credentials"
                                + (known.isEmpty ? "" : "; known: " + known.joined(separator: ", ")))
                    }
                }
                if let credential {
                    apps[member.key] = App(bundleID: member.key, credential: credential, sandboxCredential: sandbox)
                }
            }
        } else {
            decoder.problem("apps", "is required: the apps to notify, by bundle id, each naming its credential")
        }

        // apns
        var apns = APNs()
        if let object = decoder.object(root["apns"], "apns") {
            decoder.checkKeys(
                object, at: "apns",
                known: [
                    "endpoints", "ca_file", "connections", "max_connections", "max_streams", "request_timeout",
                    "proxy", "proxy_credentials_file",
                ])
            if let endpoints = decoder.object(object["endpoints"], "apns.endpoints") {
                decoder.checkKeys(endpoints, at: "apns.endpoints", known: ["production", "sandbox"])
                for (key, keyPath) in [("production", \APNs.productionURL), ("sandbox", \APNs.sandboxURL)] {
                    guard let url = decoder.string(endpoints, key, "apns.endpoints") else { continue }
                    if url.hasPrefix("https://") {
                        apns[keyPath: keyPath] = url
                    } else {
                        decoder.problem("apns.endpoints." + key, "must be an https:// URL, found '\(url.prefix(60))'")
                    }
                }
            }
            apns.caFile = decoder.string(object, "ca_file", "apns")
            decoder.checkFile(apns.caFile, at: "apns.ca_file")
            apns.connections = decoder.integer(object, "connections", "apns", range: 1...64) ?? apns.connections
            apns.maxConnections =
                decoder.integer(object, "max_connections", "apns", range: 1...64)
                ?? max(apns.maxConnections, apns.connections)
            if apns.maxConnections < apns.connections {
                decoder.problem(
                    "apns.max_connections",
                    "must be at least apns.connections (\(apns.connections)); set it to \(apns.connections) to keep "
                        + "the pools at a fixed size")
            }
            apns.maxStreams = decoder.integer(object, "max_streams", "apns", range: 1...10_000) ?? apns.maxStreams
            apns.requestTimeout =
                decoder.duration(object, "request_timeout", "apns", range: 0.1...300) ?? apns.requestTimeout
            decoder.decodeProxy(object, into: &apns)
        }

        // pipeline
        var pipeline = Pipeline()
        if let object = decoder.object(root["pipeline"], "pipeline") {
            decoder.checkKeys(
                object, at: "pipeline", known: ["max_in_flight_records", "resume_below", "revoke_timeout", "threads"])
            pipeline.maxInFlightRecords =
                decoder.integer(object, "max_in_flight_records", "pipeline", range: 1...1_000_000)
                ?? pipeline.maxInFlightRecords
            pipeline.resumeBelow = decoder.integer(object, "resume_below", "pipeline", range: 0...1_000_000)
            if let resume = pipeline.resumeBelow, resume >= pipeline.maxInFlightRecords {
                decoder.problem(
                    "pipeline.resume_below", "must be below max_in_flight_records (\(pipeline.maxInFlightRecords))")
            }
            pipeline.revokeTimeout =
                decoder.duration(object, "revoke_timeout", "pipeline", range: 0...600) ?? pipeline.revokeTimeout
            pipeline.threads = decoder.integer(object, "threads", "pipeline", range: 1...64)
        }

        // retry
        var retry = Retry()
        if let object = decoder.object(root["retry"], "retry") {
            decoder.checkKeys(
                object, at: "retry",
                known: [
                    "max_attempts", "base_backoff", "max_backoff", "max_total_time", "max_hold", "park_delay",
                ])
            retry.maxAttempts = decoder.integer(object, "max_attempts", "retry", range: 1...20) ?? retry.maxAttempts
            retry.baseBackoff =
                decoder.duration(object, "base_backoff", "retry", range: 0.001...60) ?? retry.baseBackoff
            retry.maxBackoff = decoder.duration(object, "max_backoff", "retry", range: 0.001...3600) ?? retry.maxBackoff
            retry.maxTotalTime =
                decoder.duration(object, "max_total_time", "retry", range: 0.001...86_400) ?? retry.maxTotalTime
            retry.maxHold = decoder.duration(object, "max_hold", "retry", range: 0.001...604_800) ?? retry.maxHold
            retry.parkDelay = decoder.duration(object, "park_delay", "retry", range: 0.001...86_400) ?? retry.parkDelay
            if retry.baseBackoff > retry.maxBackoff {
                decoder.problem("retry.base_backoff", "must not exceed max_backoff")
            }
        }

        var configuration = WorkerConfiguration(
            kafka: kafka, credentials: credentials, apps: apps, apns: apns,
            pipeline: pipeline, retry: retry)
        if let object = decoder.object(root["shutdown"], "shutdown") {
            decoder.checkKeys(object, at: "shutdown", known: ["drain_timeout"])
            configuration.drainTimeout =
                decoder.duration(object, "drain_timeout", "shutdown", range: 0...3600)
                ?? configuration.drainTimeout
        }
        if let object = decoder.object(root["rules"], "rules") {
            decoder.checkKeys(object, at: "rules", known: ["file"])
            configuration.rulesFile = decoder.string(object, "file", "rules") ?? configuration.rulesFile
            decoder.checkFile(configuration.rulesFile, at: "rules.file")
        }
        if let object = decoder.object(root["metrics"], "metrics") {
            decoder.checkKeys(object, at: "metrics", known: ["listen"])
            if let listen = decoder.string(object, "listen", "metrics") {
                if Self.isHostPort(listen, allowEmptyHost: true) {
                    configuration.metricsListen = listen
                } else {
                    decoder.problem(
                        "metrics.listen", "must be HOST:PORT such as 0.0.0.0:9090, found '\(listen.prefix(60))'")
                }
            }
        }
        if let object = decoder.object(root["log"], "log") {
            decoder.checkKeys(object, at: "log", known: ["level"])
            let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
            if let level = decoder.string(object, "level", "log") {
                if levels.contains(level) {
                    configuration.logLevel = level
                } else {
                    decoder.problem(
                        "log.level", "must be one of \(levels.joined(separator: ", ")), found '\(level.prefix(20))'")
                }
            }
        }

        guard decoder.problems.isEmpty else { throw ConfigurationError(problems: decoder.problems) }
        self = configuration
    }

    /// Properties the worker sets itself for its delivery guarantees.
    static let ownedProperties: Set<String> = [
        "bootstrap.servers", "metadata.broker.list", "group.id", "group.instance.id", "enable.auto.commit",
        "enable.auto.offset.store", "enable.idempotence", "transactional.id",
    ]

    /// Why the worker refuses librdkafka's unsecured OAUTHBEARER tokens: unsigned, for development brokers
    /// only, and with librdkafka 2.0.2 (Debian's, the image's) a `sasl.oauthbearer.config` it cannot parse
    /// crashes the process about 10 s after start (its retry of the token refresh uses a queue the
    /// unsecured path never set), where the worker should say what is wrong and wait.
    static let unsecuredTokensProblem =
        "unsigned OAUTHBEARER tokens are for development brokers only, and with librdkafka 2.0.2 a "
        + "sasl.oauthbearer.config it cannot parse crashes the worker about 10 s after start; use "
        + "sasl.oauthbearer.method: oidc with sasl.oauthbearer.client.id, sasl.oauthbearer.token.endpoint.url and the client "
        + "secret under kafka.property_files"

    static func isSecretProperty(_ name: String) -> Bool {
        name.contains("password") || name.contains("secret") || name.hasSuffix(".pem") || name.hasPrefix("ssl.key.")
            || name.contains("oauthbearer.config")
    }

    static func isAppleIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) }
    }

    static func isHostPort(_ text: String, allowEmptyHost: Bool = false) -> Bool {
        guard let colon = text.lastIndex(of: ":") else { return false }
        let host = text[..<colon]
        guard let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return false }
        return allowEmptyHost || !host.isEmpty
    }
}
