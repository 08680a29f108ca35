// The librdkafka properties both Kafka clients get: the configured ones and those read from files.

import Foundation

extension WorkerRuntime {
    /// The librdkafka properties: the configured ones plus those read from files (secrets).
    static func kafkaProperties(_ kafka: WorkerConfiguration.Kafka) throws -> [String: String] {
        var properties = kafka.properties
        var problems: [ConfigurationProblem] = []
        for (name, path) in kafka.propertyFiles {
            guard let data = FileManager.default.contents(atPath: path) else {
                problems.append(
                    ConfigurationProblem(
                        path: "kafka.property_files." + name,
                        message: "the file \(path) does not exist or cannot be read"))
                continue
            }
            var value = String(decoding: data, as: UTF8.self)
            while value.hasSuffix("\n") || value.hasSuffix("\r") { value.removeLast() }
            properties[name] = value
        }
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return properties
    }
}
