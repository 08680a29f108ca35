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
        var producerConfiguration = testProducerConfiguration(cluster)
        producerConfiguration.linger = .zero
        let producer = try KafkaProducer(configuration: producerConfiguration)
        // 1 KB records, 2 MB against a 64 KB queue fetched 32 KB at a time. One at a time, so that each is
        // a batch of its own: a fetch returns whole batches, and large ones would fill the queue in one go.
        let padding = String(repeating: "x", count: 1_000)
        for index in 0..<(perPartition * Int(partitions)) {
            _ = try await producer.send(
                topic: "in", key: nil, value: Array("\(index) \(padding)".utf8), partition: Int32(index) % partitions)
        }
        try await producer.close(timeout: .seconds(10))

        var configuration = testConsumerConfiguration(cluster, group: "small-queue")
        // A small hand-off, so that librdkafka's queue is what fills while the reader dawdles.
        configuration.bufferCapacity = 16
        configuration.client[property: "queued.max.messages.kbytes"] = "64"
        // A fetch may overshoot the queue's size by a partition's fetch size: keep that small too, so the
        // queue fills and empties dozens of times per partition.
        configuration.client[property: "fetch.message.max.bytes"] = "32768"
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        let total = perPartition * Int(partitions)
        let received = try await receiveSlowly(total, from: consumer, within: .seconds(120))
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

    /// Reads like `receive`, but pauses a moment every 32 records: a reader slower than the fetcher lets
    /// librdkafka's queue fill, so that fetching stops for every partition whose queue is full.
    private func receiveSlowly(
        _ count: Int, from consumer: KafkaConsumer, within timeout: Duration
    ) async throws -> [KafkaConsumerMessage] {
        try await withThrowingTaskGroup(of: [KafkaConsumerMessage]?.self) { group in
            group.addTask {
                var received: [KafkaConsumerMessage] = []
                for try await message in consumer.messages {
                    received.append(message)
                    if received.count >= count { break }
                    if received.count % 32 == 0 { try await Task.sleep(for: .milliseconds(2)) }
                }
                return received
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            if let received = try await group.next()! { return received }
            group.cancelAll()
            return try await group.next()!!
        }
    }
}
