// The librdkafka properties both Kafka clients get (the configured ones and those read from files), and the
// results producer's own settings.

import Foundation
import Kafka

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

    /// How long the results producer lets a record wait to be batched (`linger.ms`) unless `kafka.properties`
    /// sets `linger.ms` (or its alias `queue.buffering.max.ms`). librdkafka's default of 5 ms sent many
    /// small requests under a backlog (one as each in-flight slot freed) and its broker threads hardly
    /// slept; at 20 ms, against Tansu, the worker spent a fifth less CPU per notification and drained a
    /// backlog about a third faster (docs/performance.md, "The results producer lingers 20 ms"). Only
    /// results wait for it, never a push: an outcome and the commit of its offset come up to 20 ms later.
    static let resultsLinger = Duration.milliseconds(20)

    /// The results producer's settings: the clients' properties (which win over the worker's own choices),
    /// ``resultsLinger``, and a transactional id in exactly-once mode.
    static func producerConfiguration(client: KafkaConfiguration, _ kafka: WorkerConfiguration.Kafka)
        -> KafkaProducerConfiguration
    {
        var configuration = KafkaProducerConfiguration(client: client)
        configuration.linger = resultsLinger
        if kafka.exactlyOnce {
            configuration.client.properties["transactional.id"] = transactionalID(kafka)
        }
        return configuration
    }

    /// The consumer's stranded-partition threshold from `kafka.stranded_partition_after`; nil (no watch) for 0.
    static func strandedPartitionThreshold(_ kafka: WorkerConfiguration.Kafka) -> Duration? {
        kafka.strandedPartitionAfter > 0 ? .milliseconds(Int64(kafka.strandedPartitionAfter * 1000)) : nil
    }
}
