// Turns the parsed worker.yaml (after environment overrides) into WorkerConfiguration, collecting
// every problem with the key path where it is and what would be right.
public import APNs

/// One problem in the configuration: where (a key path such as `kafka.topics.requests`, and the
/// file position when known) and what is wrong.
public struct ConfigurationProblem: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String
    /// `file:line:column`, filled in by the loader when the YAML position is known.
    public var location: String?

    public var description: String {
        (location.map { $0 + ": " } ?? "") + (path.isEmpty ? "" : path + ": ") + message
    }
}

/// A configuration that cannot be used; lists every problem.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]
    public var description: String {
        "the configuration has \(problems.count) problem\(problems.count == 1 ? "" : "s"):\n"
            + problems.map { "  " + $0.description }.joined(separator: "\n")
    }
}

struct ConfigurationDecoder {
    var problems: [ConfigurationProblem] = []

    mutating func problem(_ path: String, _ message: String) {
        problems.append(ConfigurationProblem(path: path, message: message))
    }

    /// Reports keys of `object` not in `known`, suggesting the closest known one.
    mutating func checkKeys(_ object: JSONObject, at path: String, known: [String]) {
        for key in object.keys where !known.contains(key) {
            let hint = closest(key, known).map { "; did you mean '\($0)'?" } ?? "; known keys: " + known.joined(separator: ", ")
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

    mutating func string(_ object: JSONObject, _ key: String, _ path: String, required: Bool = false) -> String? {
        guard let value = object[key], !value.isNull else {
            if required { problem(join(path, key), "is required") }
            return nil
        }
        switch value {
        case .string(let text):
            if text.isEmpty { problem(join(path, key), "must not be empty") }
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

    /// A duration: a number of seconds, or a string like `250ms`, `10s`, `5m`, `1h`.
    mutating func duration(_ object: JSONObject, _ key: String, _ path: String, range: ClosedRange<Double>) -> Double? {
        guard let value = object[key], !value.isNull else { return nil }
        var seconds: Double?
        if let number = value.doubleValue { seconds = number }
        if let text = value.stringValue { seconds = Self.parseDuration(text) }
        guard let seconds else {
            problem(join(path, key), "must be a duration like 250ms, 10s, 5m or 1h, found \(value.compactString.prefix(40))")
            return nil
        }
        guard range.contains(seconds) else {
            problem(join(path, key), "must be between \(range.lowerBound)s and \(range.upperBound)s, found \(seconds)s")
            return nil
        }
        return seconds
    }

    static func parseDuration(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            if let value = Double(number), value >= 0 { return value * scale }
        }
        return Double(text).flatMap { $0 >= 0 ? $0 : nil }
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

    func closest(_ key: String, _ candidates: [String]) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            if a.isEmpty { return b.count }
            if b.isEmpty { return a.count }
            var previous = Array(0...b.count)
            for i in 1...a.count {
                var current = [i] + Array(repeating: 0, count: b.count)
                for j in 1...b.count {
                    current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                }
                previous = current
            }
            return previous[b.count]
        }
        let scored = candidates.map { ($0, distance(Array(key), Array($0))) }.filter { $0.1 <= max(2, key.count / 3) }
        return scored.min { $0.1 < $1.1 }?.0
    }
}

extension WorkerConfiguration {
    /// Decodes a parsed configuration document. Throws every problem found at once.
    public init(decoding document: JSONValue) throws(ConfigurationError) {
        var decoder = ConfigurationDecoder()
        guard let root = document.objectValue else {
            throw ConfigurationError(problems: [
                ConfigurationProblem(path: "", message: "the configuration must be a mapping, found \(document.typeName)")
            ])
        }
        decoder.checkKeys(root, at: "", known: ["version", "kafka", "apps", "apns", "pipeline", "rules", "observability"])
        if let version = root["version"], version.intValue != 1 {
            decoder.problem("version", "must be 1, found \(version.compactString.prefix(20))")
        }

        // kafka
        var kafka = Kafka(brokers: "")
        if let object = decoder.object(root["kafka"], "kafka") {
            decoder.checkKeys(
                object, at: "kafka",
                known: ["brokers", "group_id", "topics", "properties", "consumer_properties", "producer_properties"])
            if let brokers = object["brokers"]?.arrayValue {
                kafka.brokers = brokers.compactMap(\.stringValue).joined(separator: ",")
            } else {
                kafka.brokers = decoder.string(object, "brokers", "kafka", required: true) ?? ""
            }
            kafka.groupID = decoder.string(object, "group_id", "kafka") ?? kafka.groupID
            if let topics = decoder.object(object["topics"], "kafka.topics") {
                decoder.checkKeys(topics, at: "kafka.topics", known: ["requests", "outcomes", "invalid_tokens", "dead_letters"])
                kafka.requestsTopic = decoder.string(topics, "requests", "kafka.topics") ?? kafka.requestsTopic
                kafka.outcomesTopic = decoder.string(topics, "outcomes", "kafka.topics") ?? kafka.outcomesTopic
                kafka.invalidTokensTopic = decoder.string(topics, "invalid_tokens", "kafka.topics") ?? kafka.invalidTokensTopic
                kafka.deadLetterTopic = decoder.string(topics, "dead_letters", "kafka.topics") ?? kafka.deadLetterTopic
            }
            kafka.properties = decoder.stringMap(object, "properties", "kafka")
            kafka.consumerProperties = decoder.stringMap(object, "consumer_properties", "kafka")
            kafka.producerProperties = decoder.stringMap(object, "producer_properties", "kafka")
        } else {
            decoder.problem("kafka", "is required: at least kafka.brokers")
        }

        // apps
        var apps: [App] = []
        if let list = root["apps"]?.arrayValue, !list.isEmpty {
            for (index, value) in list.enumerated() {
                let path = "apps[\(index)]"
                guard let object = decoder.object(value, path) else { continue }
                decoder.checkKeys(object, at: path, known: ["bundle_id", "credential", "environments"])
                let bundleID = decoder.string(object, "bundle_id", path, required: true) ?? ""
                if apps.contains(where: { $0.bundleID == bundleID }) {
                    decoder.problem(path + ".bundle_id", "'\(bundleID)' is configured twice")
                }
                var environments: [APNsEnvironment] = [.production, .sandbox]
                if let list = object["environments"]?.arrayValue {
                    environments = []
                    for item in list {
                        if let name = item.stringValue, let environment = try? APNsEnvironment(parsing: name) {
                            environments.append(environment)
                        } else {
                            decoder.problem(path + ".environments", "entries must be production or sandbox")
                        }
                    }
                }
                guard let credential = decoder.object(object["credential"], path + ".credential") else {
                    decoder.problem(path + ".credential", "is required: a token (key_file, key_id, team_id) or a certificate (cert_file)")
                    continue
                }
                let credentialPath = path + ".credential"
                let decoded: Credential?
                switch credential["type"]?.stringValue ?? (credential["cert_file"] != nil ? "certificate" : "token") {
                case "token":
                    decoder.checkKeys(credential, at: credentialPath, known: ["type", "key_file", "key_id", "team_id"])
                    let keyFile = decoder.string(credential, "key_file", credentialPath, required: true)
                    let keyID = decoder.string(credential, "key_id", credentialPath, required: true)
                    let teamID = decoder.string(credential, "team_id", credentialPath, required: true)
                    if let keyFile, let keyID, let teamID {
                        decoded = .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
                    } else {
                        decoded = nil
                    }
                case "certificate":
                    decoder.checkKeys(credential, at: credentialPath, known: ["type", "cert_file", "password_file"])
                    let certFile = decoder.string(credential, "cert_file", credentialPath, required: true)
                    let passwordFile = decoder.string(credential, "password_file", credentialPath)
                    decoded = certFile.map { .certificate(certFile: $0, passwordFile: passwordFile) }
                case let other:
                    decoder.problem(credentialPath + ".type", "must be token or certificate, found '\(other.prefix(30))'")
                    decoded = nil
                }
                for secretKey in ["key", "password", "private_key", "p8"] where credential[secretKey] != nil {
                    decoder.problem(
                        credentialPath + "." + secretKey,
                        "secrets are never written inline; put the secret in a file and name it with key_file or password_file")
                }
                if let decoded { apps.append(App(bundleID: bundleID, credential: decoded, environments: environments)) }
            }
        } else {
            decoder.problem("apps", "is required: a list of apps with bundle_id and credential")
        }

        // apns
        var apns = APNs()
        if let object = decoder.object(root["apns"], "apns") {
            decoder.checkKeys(
                object, at: "apns",
                known: ["production_url", "sandbox_url", "ca_file", "connections_per_pool", "max_queued_requests",
                        "request_timeout", "connect_timeout", "retry"])
            for (key, keyPath) in [("production_url", \APNs.productionURL), ("sandbox_url", \APNs.sandboxURL)] {
                guard let url = decoder.string(object, key, "apns") else { continue }
                if url.hasPrefix("https://") { apns[keyPath: keyPath] = url } else {
                    decoder.problem("apns." + key, "must be an https:// URL, found '\(url.prefix(60))'")
                }
            }
            apns.caFile = decoder.string(object, "ca_file", "apns")
            apns.connectionsPerPool = decoder.integer(object, "connections_per_pool", "apns", range: 1...64) ?? apns.connectionsPerPool
            apns.maxQueuedRequests = decoder.integer(object, "max_queued_requests", "apns", range: 1...1_000_000)
                ?? apns.maxQueuedRequests
            apns.requestTimeout = decoder.duration(object, "request_timeout", "apns", range: 0.1...300) ?? apns.requestTimeout
            apns.connectTimeout = decoder.duration(object, "connect_timeout", "apns", range: 0.1...120) ?? apns.connectTimeout
            if let retry = decoder.object(object["retry"], "apns.retry") {
                decoder.checkKeys(retry, at: "apns.retry", known: ["max_attempts", "base_backoff", "max_backoff", "max_total_time"])
                apns.retry.maxAttempts = decoder.integer(retry, "max_attempts", "apns.retry", range: 1...100) ?? apns.retry.maxAttempts
                apns.retry.baseBackoff = decoder.duration(retry, "base_backoff", "apns.retry", range: 0.001...60) ?? apns.retry.baseBackoff
                apns.retry.maxBackoff = decoder.duration(retry, "max_backoff", "apns.retry", range: 0.001...3600) ?? apns.retry.maxBackoff
                apns.retry.maxTotalTime = decoder.duration(retry, "max_total_time", "apns.retry", range: 0.001...86_400)
                    ?? apns.retry.maxTotalTime
                if apns.retry.baseBackoff > apns.retry.maxBackoff {
                    decoder.problem("apns.retry.base_backoff", "must not exceed max_backoff")
                }
            }
        }

        // pipeline
        var pipeline = Pipeline()
        if let object = decoder.object(root["pipeline"], "pipeline") {
            decoder.checkKeys(object, at: "pipeline", known: ["max_records_in_flight", "resume_below", "revoke_timeout", "drain_timeout"])
            pipeline.maxRecordsInFlight = decoder.integer(object, "max_records_in_flight", "pipeline", range: 1...1_000_000)
                ?? pipeline.maxRecordsInFlight
            pipeline.resumeBelow = decoder.integer(object, "resume_below", "pipeline", range: 0...1_000_000)
            if let resume = pipeline.resumeBelow, resume >= pipeline.maxRecordsInFlight {
                decoder.problem("pipeline.resume_below", "must be below max_records_in_flight (\(pipeline.maxRecordsInFlight))")
            }
            pipeline.revokeTimeout = decoder.duration(object, "revoke_timeout", "pipeline", range: 0...600) ?? pipeline.revokeTimeout
            pipeline.drainTimeout = decoder.duration(object, "drain_timeout", "pipeline", range: 0...3600) ?? pipeline.drainTimeout
        }

        // rules
        var rules = Rules(file: "")
        if let object = decoder.object(root["rules"], "rules") {
            decoder.checkKeys(object, at: "rules", known: ["file", "watch"])
            rules.file = decoder.string(object, "file", "rules", required: true) ?? ""
            rules.watch = decoder.bool(object, "watch", "rules") ?? rules.watch
        } else {
            decoder.problem("rules", "is required: rules.file names the rules file")
        }

        // observability
        var observability = Observability()
        if let object = decoder.object(root["observability"], "observability") {
            decoder.checkKeys(object, at: "observability", known: ["listen", "log_level"])
            if let listen = decoder.string(object, "listen", "observability") {
                if listen.split(separator: ":").last.flatMap({ Int($0) }).map({ (0...65535).contains($0) }) == true {
                    observability.listen = listen
                } else {
                    decoder.problem("observability.listen", "must be host:port such as 0.0.0.0:9090, found '\(listen.prefix(60))'")
                }
            }
            if let level = decoder.string(object, "log_level", "observability") {
                if ["debug", "info", "warning", "error"].contains(level) { observability.logLevel = level } else {
                    decoder.problem("observability.log_level", "must be debug, info, warning or error, found '\(level.prefix(20))'")
                }
            }
        }

        guard decoder.problems.isEmpty else { throw ConfigurationError(problems: decoder.problems) }
        self.init(kafka: kafka, apps: apps, apns: apns, pipeline: pipeline, rules: rules, observability: observability)
    }
}
