// A prefetch queue far smaller than the backlog fills and empties many times over. librdkafka before
// 2.2 then left each partition idle for up to a second per queueful; the poll thread restarts it with a
// seek to the reader's position, which must neither skip nor repeat a record, nor, with the owner pausing
// and resuming meanwhile, leave a partition stopped or paused.

import Synchronization
import Testing

@testable import Kafka

@Suite("KafkaConsumer fetch restarts")
struct KafkaFetchRestartTests {
    @Test("a backlog many prefetch queues long arrives whole, in order and once, however often fetching stalls")
    func smallPrefetchQueueDeliversTheWholeBacklogOnce() async throws {
        let (received, restarts) = try await drainBacklog(pausingEvery: nil)
        try expectWholeInOrderOnce(received)
        print("librdkafka \(RDKafkaVersion.loadedText): \(restarts) fetch restarts over \(received.count) records")
        if StalledFetchRestarter.isNeeded {
            // The queue emptied while partitions waited for their broker's thread: restarts did the fetching.
            #expect(restarts > 0)
        } else {
            #expect(restarts == 0)
        }
    }

    @Test("pausing and resuming a partition over and over while fetching stalls loses, repeats and strands nothing")
    func pausesAndResumesAmidRestartsStrandNothing() async throws {
        // Each pause and resume is a librdkafka op with a version barrier, as a restart's seek is: an op that
        // overtook a resume not yet run would leave the partition paused for good (the read would time out).
        let (received, restarts) = try await drainBacklog(pausingEvery: 250)
        try expectWholeInOrderOnce(received)
        print("librdkafka \(RDKafkaVersion.loadedText): \(restarts) fetch restarts amid pauses")
        #expect(StalledFetchRestarter.isNeeded ? restarts > 0 : restarts == 0)
    }

    private static let partitions: Int32 = 2
    private static let perPartition = 1_000
    private static let handOffCapacity = 16

    /// Fills a two-partition topic with 1 KB records and reads them a queueful at a time through a 64 KB queue; with
    /// `pausingEvery`, partition 0 is paused and at once resumed after every that many records.
    private func drainBacklog(pausingEvery: Int?) async throws -> (received: [KafkaConsumerMessage], restarts: Int) {
        let partitions = Self.partitions
        let cluster = try startCluster(topic: "in", partitions: Int(partitions))
        var producerConfiguration = testProducerConfiguration(cluster)
        producerConfiguration.linger = .zero
        let producer = try KafkaProducer(configuration: producerConfiguration)
        // 1 KB records, 2 MB against a 64 KB queue fetched 32 KB at a time. One at a time, so that each is
        // a batch of its own: a fetch returns whole batches, and large ones would fill the queue in one go.
        let padding = String(repeating: "x", count: 1_000)
        for index in 0..<(Self.perPartition * Int(partitions)) {
            _ = try await producer.send(
                topic: "in", key: nil, value: Array("\(index) \(padding)".utf8), partition: Int32(index) % partitions)
        }
        try await producer.close(timeout: .seconds(10))

        var configuration = testConsumerConfiguration(cluster, group: "small-queue")
        // A small hand-off, so that librdkafka's queue is what fills while the reader waits.
        configuration.bufferCapacity = Self.handOffCapacity
        // The reader waits for librdkafka's queue to fill while the hand-off is full: a hand-off that stalls
        // would pause the partitions, which drops the queue it waits for.
        configuration.stallTimeout = .seconds(600)
        configuration.client[property: "queued.max.messages.kbytes"] = "64"
        // A fetch may overshoot the queue's size by a partition's fetch size: keep that small too, so the
        // queue fills and empties dozens of times per partition.
        configuration.client[property: "fetch.message.max.bytes"] = "32768"
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        let received = try await receiveSlowly(
            Self.perPartition * Int(partitions), from: consumer, within: .seconds(120), pausingEvery: pausingEvery)
        let restarts = consumer.fetchRestarts
        try await consumer.close()
        return (received, restarts)
    }

    private func expectWholeInOrderOnce(_ received: [KafkaConsumerMessage]) throws {
        let total = Self.perPartition * Int(Self.partitions)
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
    }

    /// Reads like `receive`, but whenever librdkafka's queue has run empty, waits until it holds more than
    /// `queued.max.messages.kbytes` again (or the rest of the backlog), then reads on at full speed. Each
    /// queueful is thus fetched to the limit, where librdkafka stops the partition, and drained faster than
    /// its broker's thread wakes on its own: the stall the restarter is for, once per queueful, on any
    /// machine however loaded. (A reader that merely dawdles lets the queue fill only when it is slower than
    /// the fetcher, which a busy machine reverses.)
    private func receiveSlowly(
        _ count: Int, from consumer: KafkaConsumer, within timeout: Duration, pausingEvery: Int?
    ) async throws -> [KafkaConsumerMessage] {
        // 1,002-1,005 bytes of payload each: a fetcher that asks only for what still fits under the 64 KB limit
        // stops at 65 of them, and 60 leaves room for the last fetch's batches.
        let nearlyFull = 60
        // Records the poll thread may hold beyond librdkafka's queue: the hand-off's and the one it delivers.
        let heldByThePollThread = Self.handOffCapacity + 1
        return try await receive(count, from: consumer, within: timeout) { received in
            if let pausingEvery, received % pausingEvery == 0 {
                let first = KafkaTopicPartition(topic: "in", partition: 0)
                try consumer.pause([first])
                try consumer.resume([first])
            }
            guard consumer.queuedInLibrdkafka == 0 else { return }
            while true {
                let queued = consumer.queuedInLibrdkafka
                if queued >= nearlyFull || received + queued + heldByThePollThread >= count { return }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }
}
