// KafkaTransactionalSink over real librdkafka (its mock cluster, which runs transactions but stores no
// offsets sent in one): held results are settled only when their transaction committed, a fatal producer
// error stops the sink for good with its reason, and nothing held is settled after it.

import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Kafka
@testable import Worker

@Suite(.serialized) struct KafkaTransactionalSinkTests {
    final class Events: Sendable {
        let list = Mutex<[KafkaTransactionalSink.Event]>([])
        let settled = Mutex<[Bool]>([])
    }

    @Test func heldResultsSettleWhenTheirTransactionCommitsAndAFatalErrorStopsTheSink() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("push.requests", partitions: 1)
        try cluster.createTopic("push.outcomes", partitions: 1)
        let client = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let consumer = try KafkaConsumer(configuration: KafkaConsumerConfiguration(client: client, groupID: "eos-test"))
        try consumer.subscribe(topics: ["push.requests"])
        var producerConfiguration = KafkaProducerConfiguration(
            client: KafkaConfiguration(
                bootstrapServers: cluster.bootstrapServers, properties: ["transactional.id": "eos-test-0"]))
        producerConfiguration.linger = .milliseconds(1)
        let producer = try KafkaProducer(configuration: producerConfiguration)
        let events = Events()
        let sink = KafkaTransactionalSink(
            producer: producer, groupMetadata: { consumer.groupMetadata() }, interval: .milliseconds(20),
            afterRecords: 1000, onEvent: { event in events.list.withLock { $0.append(event) } })
        try await sink.start(timeout: .seconds(20))

        let partition = TopicPartition(topic: "push.requests", partition: 0)
        func outcome(_ offset: Int64) -> [OutboundRecord] {
            [OutboundRecord(topic: "push.outcomes", key: nil, value: Array("outcome \(offset)".utf8))]
        }
        for offset in Int64(0)..<3 {
            sink.hold(outcome(offset), partition: partition, offset: offset) { committed in
                events.settled.withLock { $0.append(committed) }
            }
        }
        #expect(sink.heldRecords == 3)
        sink.committable(partition, nextOffset: 3)
        #expect(await eventually(timeout: .seconds(20)) { events.settled.withLock { $0.count } == 3 })
        #expect(events.settled.withLock { $0 } == [true, true, true])
        #expect(sink.transactionsCommitted >= 1)
        #expect(sink.heldRecords == 0)
        #expect(await sink.commit(until: .now + .seconds(10)), "nothing left to commit")

        producer.raiseFatalErrorForTesting(reason: "a test's fatal error")
        sink.hold(outcome(3), partition: partition, offset: 3) { committed in
            events.settled.withLock { $0.append(committed) }
        }
        sink.committable(partition, nextOffset: 4)
        #expect(await eventually(timeout: .seconds(20)) { sink.failure != nil })
        let failure = try #require(sink.failure)
        #expect(failure.hasPrefix("Kafka transactions stopped for good: "))
        #expect(failure.contains("a test's fatal error"))
        #expect(!(await sink.commit(until: .now + .seconds(1))), "a stopped sink commits nothing")
        #expect(events.settled.withLock { $0.count } == 3, "the record held at the fatal error is never settled")
        let fatalEvents = events.list.withLock { list in
            list.filter { if case .fatal = $0 { return true } else { return false } }.count
        }
        #expect(fatalEvents == 1)
        // librdkafka raises the fatal error at once but moves its transaction state machine to it on its
        // main thread, later: a transaction begun meanwhile can fail as abortable and be aborted once
        // before the next call meets the fatal state (seen once in CI, under load). Never more than once.
        #expect(sink.transactionsAborted <= 1)
        try await consumer.close(deadline: .now + .seconds(10))
    }
}
