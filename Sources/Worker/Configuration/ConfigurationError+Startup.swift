// Problems found while starting from a decoded configuration (the rules file, a Kafka property
// librdkafka refuses) as configuration problems, so that `run` reports them in the one format:
// `file:line:column: what is wrong; what would be right`.

import Kafka
public import PushRules

extension ConfigurationError {
    /// The problems of the rules file, each at its own file:line:column in that file.
    public init(rules error: RulesLoadError) {
        self.init(
            problems: error.problems.map { problem in
                ConfigurationProblem(
                    path: "", message: (problem.ruleID.map { "rule '\($0)': " } ?? "") + problem.message,
                    location: "\(problem.file):\(problem.position)")
            })
    }

    /// A failure to build the worker from `configuration` as configuration problems, when it is one: a
    /// problem with the configuration itself, or a Kafka property librdkafka refuses (placed at the
    /// property's key). Nil for anything else (a port in use, a broker that does not answer).
    public init?(startupFailure error: any Error, kafka: WorkerConfiguration.Kafka) {
        if let error = error as? ConfigurationError {
            self = error
        } else if let error = error as? KafkaError, error.code == .invalidConfiguration {
            self.init(problems: Self.kafkaProblems(error.message, kafka: kafka))
        } else {
            return nil
        }
    }

    /// The key of worker.yaml that set each librdkafka property the worker passes on.
    static func keyPaths(of kafka: WorkerConfiguration.Kafka) -> [(property: String, path: String)] {
        var paths: [(String, String)] = [
            ("bootstrap.servers", "kafka.brokers"), ("group.id", "kafka.group"),
            ("group.instance.id", "kafka.group_instance_id"),
        ]
        paths += kafka.properties.keys.map { ($0, "kafka.properties." + $0) }
        paths += kafka.propertyFiles.keys.map { ($0, "kafka.property_files." + $0) }
        // Longest first, so that `ssl.key.location` is found before a shorter name inside it.
        return paths.sorted { ($0.0.count, $0.0) > ($1.0.count, $1.0) }
    }

    /// Splits the Kafka module's `invalid Kafka configuration: property 'a' = "x": reason; property 'b' ...`
    /// into one problem per refused property; a refusal naming no property (librdkafka could not create
    /// the client from a combination) goes to the first configured property it mentions, or to
    /// `kafka.properties`.
    static func kafkaProblems(_ message: String, kafka: WorkerConfiguration.Kafka) -> [ConfigurationProblem] {
        let paths = keyPaths(of: kafka)
        let right = "see librdkafka's CONFIGURATION.md for the properties and their values"
        var problems: [ConfigurationProblem] = []
        for segment in message.components(separatedBy: "property '").dropFirst() {
            guard let quote = segment.firstIndex(of: "'") else { continue }
            let name = String(segment[..<quote])
            var reason = Self.reason(in: segment[segment.index(after: quote)...])
            if reason.isEmpty { reason = "refused" }
            let path = paths.first { $0.property == name }?.path ?? "kafka.properties." + name
            problems.append(ConfigurationProblem(path: path, message: "librdkafka refuses it: \(reason); \(right)"))
        }
        if problems.isEmpty {
            let path = paths.first { message.contains($0.property) }?.path ?? "kafka.properties"
            problems.append(ConfigurationProblem(path: path, message: "\(message); \(right)"))
        }
        return problems
    }

    /// librdkafka's reason in ` = "value": reason; ` or ` = (value hidden): reason (properties are ...)`.
    private static func reason(in rest: Substring) -> String {
        var rest = rest
        if rest.hasPrefix(" = \"") {
            guard let end = rest.dropFirst(4).firstRange(of: "\": ") else { return "" }
            rest = rest[end.upperBound...]
        } else if let end = rest.firstRange(of: "): ") ?? rest.firstRange(of: ": ") {
            rest = rest[end.upperBound...]
        }
        var text = String(rest)
        for suffix in [" (properties are listed in librdkafka's CONFIGURATION.md)", "; "] where text.hasSuffix(suffix) {
            text.removeLast(suffix.count)
        }
        return text
    }
}
