// The group consumer against the mock cluster: record contents, offset storage and commits,
// pause and resume, the bounded hand-off, and lag.

import Foundation
import Kafka
import TestSupport
import Testing

@Suite("KafkaConsumer")
struct KafkaConsumerTests {
    // librdkafka before 2.3.0 (Debian's 2.0.2) aborts in destroy otherwise (issue 4312); later ones need no wait.
    @Test("a cooperative-sticky member closed before its first assignment gets it first where librdkafka needs it")
    func closingBeforeTheFirstAssignmentWaitsForIt() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        let events = Recorder<String>()
        let consumer = try KafkaConsumer(
            configuration: testConsumerConfiguration(cluster, group: "early-close"),
            rebalanceHandler: { event in
                if case .assigned(let partitions) = event { events.append("assigned \(partitions.count)") }
            })
        try consumer.subscribe(topics: ["in"])
        // At once: the join has not completed yet. Without the wait, destroying the handle can find the
        // sticky assignor chosen but its state missing, and abort the whole test process.
        try await consumer.close()
        if RDKafkaVersion.loaded.abortsDestroyingBeforeFirstAssignment {
            #expect(events.all.first == "assigned 2", "\(events.all)")
        } else {
            // No wait: the close leaves the group as it is, and destroying the handle (when the consumer goes,
            // at the end of this test) does not abort the test process.
            #expect(events.all.isEmpty || events.all.first == "assigned 2", "\(events.all)")
        }
    }

    @Test("records arrive with their key, value, headers and a create-time timestamp")
    func recordsCarryKeyValueHeadersAndTimestamp() async throws {
        let cluster = try startCluster(topic: "in", partitions: 3)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        let before = Int64(Date.nowMilliseconds)
        for index in 0..<30 {
            _ = try await producer.send(
                topic: "in", key: Array("user-\(index)".utf8), value: Array("event-\(index)".utf8),
                headers: [KafkaHeader(name: "trace", string: "t\(index)"), KafkaHeader(name: "empty", value: nil)]
            )
        }
        let after = Int64(Date.nowMilliseconds)
        try await producer.close(timeout: .seconds(5))

        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: "g"))
        try consumer.subscribe(topics: ["in"])
        let received = try await receive(30, from: consumer, within: .seconds(15))
        #expect(received.count == 30)
        for message in received {
            let index = try #require(Int(message.valueString.dropFirst("event-".count)))
            #expect(message.topic == "in")
            #expect(message.key == Array("user-\(index)".utf8))
            #expect(
                message.headers == [
                    KafkaHeader(name: "trace", string: "t\(index)"),
                    KafkaHeader(name: "empty", value: nil),
                ])
            let timestamp = try #require(message.timestamp)
            #expect(timestamp.kind == .createTime)
            #expect((before...after).contains(timestamp.millisecondsSince1970))
        }
        #expect(Set(received.map(\.valueString)).count == 30)
        try await consumer.close()
    }

    @Test("only stored offsets are committed, and a restarted group resumes exactly there")
    func storedOffsetsAreCommittedAndResumed() async throws {
        let cluster = try startCluster(topic: "in", partitions: 3)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 30, partitions: 3)  // 10 per partition
        try await producer.close(timeout: .seconds(5))
        let p0 = KafkaTopicPartition(topic: "in", partition: 0)
        let p1 = KafkaTopicPartition(topic: "in", partition: 1)
        let p2 = KafkaTopicPartition(topic: "in", partition: 2)

        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.enableAutoCommit = false
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(30, from: consumer, within: .seconds(15)).count == 30)

        // Records 0...3 of partition 0 and all of partition 1 are finished; partition 2 is not.
        try consumer.storeOffset(topic: "in", partition: 0, nextOffset: 4)
        try consumer.storeOffset(topic: "in", partition: 1, nextOffset: 10)
        try await consumer.commit()
        let committed = try await KafkaCommittedOffsets.read(
            groupID: "g", partitions: [p0, p1, p2], configuration: configuration.client
        )
        #expect(committed == [p0: 4, p1: 10])
        #expect(try await consumer.committedOffsets(for: [p0, p1, p2]) == [p0: 4, p1: 10])
        try await consumer.close()

        // A new member of the group starts after the committed offsets and re-reads partition 2.
        let restarted = try KafkaConsumer(configuration: configuration)
        try restarted.subscribe(topics: ["in"])
        let again = try await receive(16, from: restarted, within: .seconds(15))
        #expect(again.count == 16)
        #expect(again.filter { $0.partition == 0 }.map(\.offset).sorted() == Array(4..<10))
        #expect(again.filter { $0.partition == 1 }.isEmpty)
        #expect(again.filter { $0.partition == 2 }.map(\.offset).sorted() == Array(0..<10))
        try await restarted.close()
    }

    @Test("auto-commit commits a stored offset without an explicit commit")
    func autoCommitCommitsStoredOffsets() async throws {
        let cluster = try startCluster(topic: "in", partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 5, partitions: 1)
        try await producer.close(timeout: .seconds(5))
        let configuration = testConsumerConfiguration(cluster, group: "g")  // auto-commit every 200 ms
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(5, from: consumer, within: .seconds(15)).count == 5)
        let partition = KafkaTopicPartition(topic: "in", partition: 0)

        try await Task.sleep(for: .milliseconds(600))
        #expect(try await consumer.committedOffsets(for: [partition]).isEmpty, "nothing stored, nothing committed")
        try consumer.storeOffset(topic: "in", partition: 0, nextOffset: 3)
        var committed: [KafkaTopicPartition: Int64] = [:]
        for _ in 0..<40 where committed[partition] != 3 {
            try await Task.sleep(for: .milliseconds(100))
            committed = try await consumer.committedOffsets(for: [partition])
        }
        #expect(committed == [partition: 3])
        try await consumer.close()
    }

    @Test("with a commit interval, stored offsets are committed by the consumer itself, auto-commit off")
    func commitIntervalCommitsStoredOffsets() async throws {
        let cluster = try startCluster(topic: "in", partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 5, partitions: 1)
        try await producer.close(timeout: .seconds(5))
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.enableAutoCommit = false  // so only the consumer's own commits can commit
        configuration.commitInterval = .milliseconds(50)
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(5, from: consumer, within: .seconds(15)).count == 5)
        let partition = KafkaTopicPartition(topic: "in", partition: 0)
        for nextOffset: Int64 in [2, 5] {
            try consumer.storeOffset(topic: "in", partition: 0, nextOffset: nextOffset)
            let committed = await eventually(timeout: .seconds(10), every: .milliseconds(50)) {
                (try? await consumer.committedOffsets(for: [partition])) == [partition: nextOffset]
            }
            #expect(committed, "offset \(nextOffset) was stored but not committed")
        }
        try await consumer.close()
    }

    @Test("with commitAfterRecords, offsets that advanced that far are committed without waiting for the interval")
    func commitAfterRecordsCommitsAtOnce() async throws {
        let cluster = try startCluster(topic: "in", partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 10, partitions: 1)
        try await producer.close(timeout: .seconds(5))
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.enableAutoCommit = false
        configuration.commitInterval = .seconds(3600)  // never, within this test
        configuration.commitAfterRecords = 5
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(10, from: consumer, within: .seconds(15)).count == 10)
        let partition = KafkaTopicPartition(topic: "in", partition: 0)
        try consumer.storeOffset(topic: "in", partition: 0, nextOffset: 1)  // the first store counts one record
        try consumer.storeOffset(topic: "in", partition: 0, nextOffset: 8)  // 7 more: past 5
        let committed = await eventually(timeout: .seconds(10), every: .milliseconds(50)) {
            (try? await consumer.committedOffsets(for: [partition])) == [partition: 8]
        }
        #expect(committed)
        try await consumer.close()
    }

    @Test("storing an offset for a partition not assigned to the consumer fails")
    func storeForUnassignedPartitionFails() async throws {
        let cluster = try startCluster(topic: "in", partitions: 1)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: "g"))
        let error = #expect(throws: KafkaError.self) {
            try consumer.storeOffset(topic: "in", partition: 0, nextOffset: 1)
        }
        #expect(error?.code == .offsetStore)
        #expect(error?.message.contains("in[0]") == true)
        let pauseError = #expect(throws: KafkaError.self) {
            try consumer.pause([KafkaTopicPartition(topic: "in", partition: 0)])
        }
        #expect(pauseError?.code == .partitionState)
        #expect(pauseError?.message.contains("not assigned") == true)
        try await consumer.close()
    }

    @Test("pause stops one partition's records while others flow, and resume brings them")
    func pauseAndResumePartition() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 10, partitions: 2, prefix: "a")
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: "g"))
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(10, from: consumer, within: .seconds(15)).count == 10)

        let paused = KafkaTopicPartition(topic: "in", partition: 0)
        try consumer.pause([paused])
        try await produce(producer, topic: "in", count: 20, partitions: 2, prefix: "b")
        // All ten of partition 1 arrive; none of partition 0, even after waiting another second.
        let whilePaused = try await receive(10, from: consumer, within: .seconds(10))
        #expect(whilePaused.count == 10)
        #expect(whilePaused.allSatisfy { $0.partition == 1 })
        let extra = try await receive(1, from: consumer, within: .seconds(1))
        #expect(extra.isEmpty)

        try consumer.resume([paused])
        let afterResume = try await receive(10, from: consumer, within: .seconds(10))
        #expect(afterResume.count == 10)
        #expect(afterResume.allSatisfy { $0.partition == 0 })
        #expect(afterResume.map(\.offset) == Array(5..<15))
        try await producer.close(timeout: .seconds(5))
        try await consumer.close()
    }

    @Test("a partition paused before it has fetched hands out nothing until resumed, then all of it in order")
    func pauseBeforeFirstFetch() async throws {
        // librdkafka is told of the pause only once the partition has fetched (a pause issued while its fetch
        // start is pending could drop that start); the first record it fetched waits for the resume.
        let cluster = try startCluster(topic: "in", partitions: 2)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: "g"))
        try consumer.subscribe(topics: ["in"])
        let paused = KafkaTopicPartition(topic: "in", partition: 0)
        // Nothing is produced yet, so the partition cannot have fetched a record by the pause. What
        // `assignment()` lists, `pause` accepts (librdkafka's own list comes a moment earlier).
        #expect(await eventually(timeout: .seconds(10)) { consumer.assignment().count == 2 })
        try consumer.pause([paused])

        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 20, partitions: 2)
        let whilePaused = try await receive(10, from: consumer, within: .seconds(10))
        #expect(whilePaused.count == 10)
        #expect(whilePaused.allSatisfy { $0.partition == 1 })
        // Partition 0 has fetched: its first record is held, and librdkafka holds the rest.
        #expect(await eventually(timeout: .seconds(10)) { consumer.holdsFirstRecord(of: paused) })
        #expect(try await receive(1, from: consumer, within: .seconds(1)).isEmpty)

        try consumer.resume([paused])
        let afterResume = try await receive(10, from: consumer, within: .seconds(10))
        #expect(afterResume.allSatisfy { $0.partition == 0 })
        #expect(afterResume.map(\.offset) == Array(0..<10))
        try await producer.close(timeout: .seconds(5))
        try await consumer.close()
    }

    @Test("a reader that stops leaves at most bufferCapacity records buffered, and nothing is lost")
    func boundedHandOffLosesNothing() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 400, partitions: 2)
        try await producer.close(timeout: .seconds(5))
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.bufferCapacity = 8
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])

        #expect(await eventually(timeout: .seconds(10)) { consumer.bufferedMessageCount > 0 })
        try await Task.sleep(for: .seconds(1))
        #expect(consumer.bufferedMessageCount <= 8)

        let received = try await receive(400, from: consumer, within: .seconds(15))
        #expect(received.count == 400)
        for partition in Int32(0)..<2 {
            #expect(received.filter { $0.partition == partition }.map(\.offset) == Array(0..<200))
        }
        try await consumer.close()
    }

    @Test("lag is the high watermark minus the position, and reaches 0 once everything is read")
    func lagFollowsPosition() async throws {
        let cluster = try startCluster(topic: "in", partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 40, partitions: 1)
        try await producer.close(timeout: .seconds(5))
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.bufferCapacity = 4
        let consumer = try KafkaConsumer(configuration: configuration)
        try consumer.subscribe(topics: ["in"])

        #expect(await eventually(timeout: .seconds(10)) { consumer.bufferedMessageCount == 4 })
        let lag = try #require(try consumer.partitionLags().first)
        #expect(lag.highWatermark == 40)
        let position = try #require(lag.position)
        #expect(position < 40)
        #expect(lag.lag == 40 - position)

        #expect(try await receive(40, from: consumer, within: .seconds(10)).count == 40)
        let drained = try #require(try consumer.partitionLags().first)
        #expect(drained.position == 40)
        #expect(drained.lag == 0)
        try await consumer.close()
    }
}

extension Date {
    static var nowMilliseconds: Double { Date().timeIntervalSince1970 * 1000 }
}
