// Shared setup for the Kafka tests: a mock cluster per test, fast group timings, and helpers that
// wait for records or events with a deadline instead of sleeping blindly.

import Kafka
import Synchronization
import Testing

/// Group timings short enough for the mock cluster to rebalance in about a second.
func testConsumerConfiguration(
    _ cluster: MockKafkaCluster, group: String,
    strategy: KafkaConsumerConfiguration.AssignmentStrategy = .cooperativeSticky
) -> KafkaConsumerConfiguration {
    var configuration = KafkaConsumerConfiguration(
        client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, clientID: "kafka-tests"),
        groupID: group
    )
    configuration.assignmentStrategy = strategy
    configuration.sessionTimeout = .seconds(3)
    configuration.heartbeatInterval = .milliseconds(300)
    configuration.autoCommitInterval = .milliseconds(200)
    configuration.rebalanceDeadline = .seconds(5)
    return configuration
}

func testProducerConfiguration(_ cluster: MockKafkaCluster) -> KafkaProducerConfiguration {
    var configuration = KafkaProducerConfiguration(
        client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, clientID: "kafka-tests")
    )
    configuration.linger = .milliseconds(2)
    // librdkafka's default backoff grows to 10 s; a passed-through property keeps outage tests short.
    configuration.client[property: "reconnect.backoff.max.ms"] = "500"
    return configuration
}

/// A mock cluster with one topic.
func startCluster(brokers: Int = 3, topic: String, partitions: Int) throws -> MockKafkaCluster {
    let cluster = try MockKafkaCluster(brokers: brokers)
    try cluster.createTopic(topic, partitions: partitions)
    return cluster
}

/// Sends `count` records spread over `partitions` partitions (record i goes to i % partitions) and
/// returns their delivery reports.
@discardableResult
func produce(
    _ producer: KafkaProducer, topic: String, count: Int, partitions: Int32, prefix: String = "m"
) async throws -> [KafkaDeliveryReport] {
    try await withThrowingTaskGroup(of: KafkaDeliveryReport.self) { group in
        for index in 0..<count {
            group.addTask {
                try await producer.send(
                    topic: topic, key: Array("k\(index)".utf8), value: Array("\(prefix)\(index)".utf8),
                    partition: Int32(index) % partitions
                )
            }
        }
        var reports: [KafkaDeliveryReport] = []
        for try await report in group { reports.append(report) }
        return reports
    }
}

/// Reads records until `count` arrived or `timeout` passed; returns what arrived. `afterEach` runs with the
/// number received so far after every record but the last (a reader that dawdles, pauses, ...).
func receive(
    _ count: Int, from consumer: KafkaConsumer, within timeout: Duration,
    afterEach: @escaping @Sendable (_ received: Int) async throws -> Void = { _ in }
) async throws -> [KafkaConsumerMessage] {
    try await withThrowingTaskGroup(of: [KafkaConsumerMessage]?.self) { group in
        group.addTask {
            var received: [KafkaConsumerMessage] = []
            for try await message in consumer.messages {
                received.append(message)
                if received.count >= count { break }
                try await afterEach(received.count)
            }
            return received
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        // The reader returns early when cancelled, with what it has.
        let first = try await group.next()!
        if let received = first { return received }
        group.cancelAll()
        return try await group.next()!!
    }
}

/// Records values thread-safely for later assertions.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

extension KafkaConsumerMessage {
    var valueString: String { String(decoding: value ?? [], as: UTF8.self) }
}
