// The pipeline on librdkafka's mock cluster: every event's outcomes produced and its offset committed.

import APNs
import Foundation
import JSON
import Kafka
import Synchronization
import TestSupport
import Testing

@testable import Worker

/// Kafka helpers for pipeline tests on librdkafka's mock cluster.
enum KafkaTestSupport {
    static func consumerConfiguration(_ cluster: MockKafkaCluster, group: String) -> KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(
            client: KafkaConfiguration(
                bootstrapServers: cluster.bootstrapServers,
                properties: [
                    "reconnect.backoff.max.ms": "500", "topic.metadata.refresh.interval.ms": "500",
                ]),
            groupID: group)
        configuration.autoCommitInterval = .milliseconds(200)
        configuration.sessionTimeout = .seconds(6)
        return configuration
    }

    static func producer(_ cluster: MockKafkaCluster) throws -> KafkaProducer {
        var configuration = KafkaProducerConfiguration(
            client: KafkaConfiguration(
                bootstrapServers: cluster.bootstrapServers, properties: ["reconnect.backoff.max.ms": "500"]))
        configuration.linger = .milliseconds(2)
        return try KafkaProducer(configuration: configuration)
    }

    /// Reads `topic` from the beginning with a fresh group until `count` records arrived, or what arrived
    /// by the timeout (a safety net for a hung run, not a speed bound: a loaded machine reads tens of
    /// thousands of records slowly, so it is generous).
    static func readAll(_ cluster: MockKafkaCluster, topic: String, count: Int, timeout: Duration = .seconds(180))
        async throws -> [KafkaConsumerMessage]
    {
        let read = Atomic<Int>(0)
        return try await readAll(cluster, topic: topic, timeout: timeout) { _ in
            read.add(1, ordering: .relaxed).newValue >= count
        }
    }

    /// Reads `topic` from the beginning with a fresh group until `isDone` says the record it was just shown
    /// completes the reading, or what arrived by the timeout. `isDone` sees every record once, in the order
    /// read, from one task.
    static func readAll(
        _ cluster: MockKafkaCluster, topic: String, timeout: Duration = .seconds(180),
        until isDone: @escaping @Sendable (KafkaConsumerMessage) -> Bool
    ) async throws -> [KafkaConsumerMessage] {
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration(cluster, group: "reader-\(UUID().uuidString)"))
        try consumer.subscribe(topics: [topic])
        let deadline = ContinuousClock.now + timeout
        // Kept outside the task: a reader cancelled at the deadline still returns what it had read, so a
        // failing test shows how many records arrived rather than none.
        let collected = Mutex<[KafkaConsumerMessage]>([])
        let collector = Task {
            for try await message in consumer.messages {
                collected.withLock { $0.append(message) }
                if isDone(message) { break }
            }
        }
        let watchdog = Task {
            try await Task.sleep(until: deadline)
            collector.cancel()
        }
        _ = try? await collector.value
        watchdog.cancel()
        try await consumer.close()
        return collected.withLock { $0 }
    }
}

@Suite(.serialized) struct KafkaPipelineTests {
    static let tokens = (0..<6).map { String(format: "%064x", $0 + 100) }

    @Test func everyEventGetsItsOutcomesInKafkaAndItsOffsetCommitted() async throws {
        let cluster = try MockKafkaCluster(brokers: 3)
        for topic in ["push.requests": 4, "push.outcomes": 4, "push.invalid-tokens": 2, "push.dlq": 1] {
            try cluster.createTopic(topic.key, partitions: topic.value)
        }
        let producer = try KafkaTestSupport.producer(cluster)
        let events = 2000
        for index in 0..<events {
            let devices = [Self.tokens[index % 6], Self.tokens[(index + 1) % 6]]
            let value: [UInt8]
            if index % 100 == 99 {
                value = Array("{\"id\":\"evt-\(index)\"".utf8)
            } else {
                value = makeRecord(partition: 0, offset: 0, devices: devices, id: "evt-\(index)").value!
            }
            try await producer.send(
                topic: "push.requests", key: Array("u\(index)".utf8), value: value, onDelivery: { _ in })
        }
        try await producer.flush(timeout: .seconds(10))

        let source = try KafkaEventSource(
            configuration: KafkaTestSupport.consumerConfiguration(cluster, group: "apns-worker"),
            topics: ["push.requests"], report: { _ in })
        let sink = KafkaResultSink(producer: try KafkaTestSupport.producer(cluster))
        let transport = ClosureTransport { push in
            push.request.deviceToken?.hex == Self.tokens[5]
                ? apnsAnswer(push, status: 410, reason: "Unregistered", timestampMilliseconds: 1_795_953_600_000)
                : apnsAnswer(push, status: 200)
        }
        var configuration = PipelineConfiguration()
        configuration.maxRecordsInFlight = 200
        let pipeline = Pipeline(
            configuration: configuration, source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: transport)
        try pipeline.start()
        #expect(await eventually(timeout: .seconds(60)) { pipeline.counters.recordsFinished == events })
        #expect(await pipeline.drain(timeout: 10) == 0)

        let malformed = events / 100
        let expectedOutcomes = (events - malformed) * 2
        let outcomes = try await KafkaTestSupport.readAll(cluster, topic: "push.outcomes", count: expectedOutcomes)
        let pairs = Set(
            outcomes.compactMap { message -> String? in
                guard let value = message.value, let json = try? JSONValue(parsing: value) else { return nil }
                return "\(json["event_id"]!.stringValue!)/\(json["device_token"]!.stringValue!)"
            })
        #expect(outcomes.count == expectedOutcomes)
        #expect(pairs.count == expectedOutcomes)
        let letters = try await KafkaTestSupport.readAll(cluster, topic: "push.dlq", count: malformed)
        #expect(letters.count == malformed)
        // The reader's default deadline: its group join alone took over 10 s once, with the whole suite running.
        let invalid = try await KafkaTestSupport.readAll(cluster, topic: "push.invalid-tokens", count: 1)
        #expect(invalid.first?.key == Array(Self.tokens[5].utf8))

        let partitions = (0..<4).map { KafkaTopicPartition(topic: "push.requests", partition: Int32($0)) }
        let committed = try await KafkaCommittedOffsets.read(
            groupID: "apns-worker", partitions: partitions,
            configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), timeout: .seconds(10))
        #expect(committed.values.reduce(0, +) == Int64(events))
        await cluster.stop()
    }
}
