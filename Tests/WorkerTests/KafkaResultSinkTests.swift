// KafkaResultSink on librdkafka's mock cluster: a record Kafka refuses as too large, at enqueue (the
// producer's message.max.bytes) or in its delivery report (the broker's), is acknowledged with
// RecordTooLargeError naming the size, the limit and the topic, and the producer goes on working.

import APNs
import Foundation
import Kafka
import Synchronization
import Testing

@testable import Worker

@Suite(.serialized) struct KafkaResultSinkTests {
    final class Reports: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    static func cluster() throws -> MockKafkaCluster {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("push.dlq", partitions: 1)
        try cluster.createTopic("push.outcomes", partitions: 1)
        return cluster
    }

    static func producer(_ cluster: MockKafkaCluster, maximumMessageBytes: Int? = nil) throws -> KafkaProducer {
        var properties = ["reconnect.backoff.max.ms": "500"]
        if let maximumMessageBytes { properties["message.max.bytes"] = String(maximumMessageBytes) }
        var configuration = KafkaProducerConfiguration(
            client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, properties: properties))
        configuration.linger = .milliseconds(2)
        return try KafkaProducer(configuration: configuration)
    }

    static func publish(_ record: OutboundRecord, to sink: KafkaResultSink) async -> Result<Void, any Error> {
        await withCheckedContinuation { continuation in
            sink.publish(record) { continuation.resume(returning: $0) }
        }
    }

    @Test func aRecordOverTheProducersLimitIsRefusedAtEnqueueAndReportedOnce() async throws {
        let cluster = try Self.cluster()
        let producer = try Self.producer(cluster, maximumMessageBytes: 20_000)
        #expect(producer.maximumMessageBytes == 20_000)
        let reports = Reports()
        let sink = KafkaResultSink(producer: producer, report: reports.append)
        let source = SourceRecord(
            topic: "push.requests", partition: 2, offset: 9, key: Array("k".utf8),
            value: [UInt8](repeating: 7, count: 50_000))
        let whole = DeadLetter(source, errorClass: "undecodable", message: "not JSON")

        let result = await Self.publish(whole.record(topic: "push.dlq"), to: sink)
        let refusal = try #require(result.failure as? RecordTooLargeError)
        #expect(refusal.limitBytes == 20_000)
        #expect(refusal.topic == "push.dlq")
        #expect(refusal.detail.contains("50"))
        #expect(refusal.detail.contains("message.max.bytes (20000 bytes)"))
        #expect(refusal.detail.contains("MSG_SIZE_TOO_LARGE"))
        let line = try #require(reports.lines.withLock { $0.first })
        #expect(line.contains("push.dlq") && line.contains("source push.requests[2] offset 9"))

        // The smaller form fits, is delivered, and its own refusals would not be reported again.
        let smaller = try #require(whole.smaller(after: refusal))
        #expect(try (await Self.publish(smaller.record(topic: "push.dlq"), to: sink)).get() == ())
        var refusedAgain = smaller.record(topic: "push.dlq")
        refusedAgain.value = [UInt8](repeating: 7, count: 50_000)
        #expect(await Self.publish(refusedAgain, to: sink).failure is RecordTooLargeError)
        #expect(reports.lines.withLock { $0.count } == 1)
        try await producer.close(timeout: .seconds(5))
        await cluster.stop()
    }

    @Test func aRecordTheBrokerRefusesFailsInItsDeliveryReportAndTheProducerGoesOn() async throws {
        let cluster = try Self.cluster()
        let producer = try Self.producer(cluster)
        let reports = Reports()
        let sink = KafkaResultSink(producer: producer, report: reports.append)
        let record = OutboundRecord(topic: "push.outcomes", key: Array("evt-1".utf8), value: Array("{}".utf8))
        // The first delivery proves the topic is known, so the refusal below meets the produce request.
        #expect(try (await Self.publish(record, to: sink)).get() == ())

        try cluster.refuseNextProduceRequestsAsTooLarge(1)
        let refused = OutboundRecord(
            topic: "push.outcomes", key: Array("evt-2".utf8), value: Array("{}".utf8),
            headers: [RecordHeader(name: "traceparent", value: Array("00-aa-bb-01".utf8))])
        let result = await Self.publish(refused, to: sink)
        let refusal = try #require(result.failure as? RecordTooLargeError)
        #expect(refusal.detail.contains("the broker refused a record of 7 bytes"))
        #expect(refusal.detail.contains("push.outcomes[0]"))
        #expect(reports.lines.withLock { $0.count } == 1)
        // The sink keeps no copy of what it sends: the refusal hands back librdkafka's, for the dead letter.
        #expect(refusal.record.topic == "push.outcomes")
        #expect(refusal.record.key == Array("evt-2".utf8))
        #expect(refusal.record.value == Array("{}".utf8))
        #expect(refusal.record.headers.map(\.name) == ["traceparent"])
        #expect(refusal.record.headers.map(\.value) == [Array("00-aa-bb-01".utf8)])

        // Not fatal for the idempotent producer: the next record is delivered.
        #expect(try (await Self.publish(record, to: sink)).get() == ())
        #expect(producer.fatalError == nil)
        try await producer.close(timeout: .seconds(5))
        await cluster.stop()
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
