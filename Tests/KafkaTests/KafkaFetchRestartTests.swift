// A prefetch queue far smaller than the backlog fills and empties many times over. librdkafka before
// 2.2 then left each partition idle for up to a second per queueful; the poll thread restarts it with a
// seek to the reader's position, which must neither skip nor repeat a record.

import Synchronization
import Testing

@testable import Kafka

@Suite("KafkaConsumer fetch restarts")
struct KafkaFetchRestartTests {
    @Test("a backlog many prefetch queues long arrives whole, in order and once, however often fetching stalls")
    func smallPrefetchQueueDeliversTheWholeBacklogOnce() async throws {
        let partitions: Int32 = 2
        let perPartition = 1_000
        let cluster = try startCluster(topic: "in", partitions: Int(partitions))
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        // 1 KB records: 2 MB against a 64 KB queue, about thirty queuefuls.
        let padding = String(repeating: "x", count: 1_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<(perPartition * Int(partitions)) {
                group.addTask {
                    _ = try await producer.send(
                        topic: "in", key: nil, value: Array("\(index) \(padding)".utf8),
                        partition: Int32(index) % partitions)
                }
            }
            try await group.waitForAll()
        }
        try await producer.close(timeout: .seconds(10))

        var configuration = testConsumerConfiguration(cluster, group: "small-queue")
        configuration.client[property: "queued.max.messages.kbytes"] = "64"
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        let total = perPartition * Int(partitions)
        let received = try await receive(total, from: consumer, within: .seconds(120))
        let restarts = consumer.fetchRestarts
        try await consumer.close()

        #expect(received.count == total)
        var next: [Int32: Int64] = [:]
        var seen = Set<Int>()
        for message in received {
            // Offsets follow one another per partition: nothing skipped, nothing repeated.
            #expect(message.offset == next[message.partition, default: 0], "partition \(message.partition)")
            next[message.partition] = message.offset + 1
            let index = try #require(Int(message.valueString.prefix { $0 != " " }))
            #expect(seen.insert(index).inserted, "record \(index) arrived twice")
        }
        #expect(seen.count == total)
        print("librdkafka \(RDKafkaVersion.loadedText): \(restarts) fetch restarts over \(total) records")
        if StalledFetchRestarter.isNeeded {
            // The queue emptied while partitions waited for their broker's thread: restarts did the fetching.
            #expect(restarts > 0)
        } else {
            #expect(restarts == 0)
        }
    }
}
