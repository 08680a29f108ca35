// A partition librdkafka stops fetching on its own (confluentinc/librdkafka#5591 left one paused for good
// in production) must not be work silently left undone: the consumer finds it, says so in its status,
// and gets it fetching again, with nothing skipped or read twice.

import Synchronization
import TestSupport
import Testing

@testable import Kafka

@Suite("KafkaConsumer stranded partitions")
struct KafkaStrandedPartitionTests {
    static let partitions: Int32 = 2
    static let stranded = KafkaTopicPartition(topic: "in", partition: 1)

    /// A two-partition topic, a producer, and a consumer of `group` subscribed to it whose status changes
    /// are recorded, with the watch's threshold at `threshold`.
    struct Stack {
        let producer: KafkaProducer
        let consumer: KafkaConsumer
        let changes = Recorder<KafkaConsumerStatusChange>()
        private let cluster: MockKafkaCluster

        private let group: String

        init(
            group: String, threshold: Duration,
            rebalanceHandler: (@Sendable (KafkaRebalanceEvent) async -> Void)? = nil
        ) throws {
            cluster = try startCluster(topic: "in", partitions: Int(KafkaStrandedPartitionTests.partitions))
            self.group = group
            producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
            var configuration = testConsumerConfiguration(cluster, group: group)
            configuration.strandedPartitionThreshold = threshold
            let changes = changes
            consumer = try KafkaConsumer(
                configuration: configuration, rebalanceHandler: rebalanceHandler,
                statusHandler: { changes.append($0) })
        }

        /// Another consumer of the group, without a watch.
        func joiningConsumer() throws -> KafkaConsumer {
            try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: group))
        }

        func close() async throws {
            try await consumer.close()
            try await producer.close(timeout: .seconds(10))
        }
    }

    @Test("a partition librdkafka keeps paused behind the consumer's back is found, shown and fetched again")
    func aStrandedPartitionIsFoundShownAndFetchedAgain() async throws {
        let stack = try Stack(group: "stranded", threshold: .milliseconds(500))
        let (producer, consumer, changes) = (stack.producer, stack.consumer, stack.changes)
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions, prefix: "before-")
        try consumer.subscribe(topics: ["in"])
        var received = try await receive(20, from: consumer, within: .seconds(30))
        #expect(received.count == 20)

        // librdkafka pauses partition 1 without the consumer knowing: nothing it holds says paused.
        consumer.strandForTesting(Self.stranded)
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions, prefix: "after-")
        received += try await receive(20, from: consumer, within: .seconds(60))

        // Every record once: partition 1's ten came after the watch restarted it.
        #expect(received.count == 40)
        #expect(Set(received.map(\.valueString)).count == 40)
        #expect(consumer.strandedRestarts >= 1)
        // The poll thread applies the watch's finding to the status; the records may come first.
        #expect(await eventually { changes.all.contains { $0.strandedPartitionsChanged } })
        let found = changes.all.filter { $0.strandedPartitionsChanged }
        #expect(found.first?.current.strandedPartitions == [Self.stranded], "the status named the partition")
        // Moving again, it leaves the status.
        #expect(await eventually(timeout: .seconds(30)) { consumer.status.strandedPartitions.isEmpty })
        #expect(changes.all.last { $0.strandedPartitionsChanged }?.current.strandedPartitions == [])
        try await Self.expectNothingReadAgain(stack)
        try await stack.close()
    }

    @Test("a partition stranded before its first fetch is found, and either fetched again or kept in the status")
    func aPartitionStrandedBeforeItFetchedIsFoundAndNeverSilent() async throws {
        let stack = try Stack(group: "stranded-early", threshold: .milliseconds(500))
        let (producer, consumer, changes) = (stack.producer, stack.consumer, stack.changes)
        try consumer.subscribe(topics: ["in"])
        // Assigned while the topic is empty: no position yet, no committed offset, so the watch reads where
        // the partition would start from its earliest record.
        #expect(await eventually { consumer.status.partitionsAssigned == Int(Self.partitions) })
        // The pause may come before or after librdkafka ran the assignment's fetch start. After it, the
        // watch's resume gets the partition fetching. Before it, the pause's version makes librdkafka drop
        // the fetch start (confluentinc/librdkafka#2190): no resume or seek starts a fetch that was never
        // started, and the partition must then stay in the status (the worker's /readyz, and its /healthz
        // after ten minutes, so that a restart moves it), restarted again at every look.
        consumer.strandForTesting(Self.stranded)
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions)
        let received = try await receive(20, from: consumer, within: .seconds(20))

        // The poll thread applies the watch's finding to the status; the records may come first.
        #expect(await eventually { changes.all.contains { $0.strandedPartitionsChanged } })
        #expect(changes.all.first { $0.strandedPartitionsChanged }?.current.strandedPartitions == [Self.stranded])
        #expect(Set(received.map(\.valueString)).count == received.count, "nothing read twice")
        #expect(received.filter { $0.partition != Self.stranded.partition }.count == 10)
        if received.count == 20 {
            print("the stranded partition fetched again after \(consumer.strandedRestarts) restarts")
            #expect(
                await eventually(timeout: .seconds(30)) { consumer.status.strandedPartitions.isEmpty },
                "\(changes.all.filter { $0.strandedPartitionsChanged }.map(\.current.strandedPartitions)), \(consumer.strandedChecks) checks"
            )
            try await Self.expectNothingReadAgain(stack)
        } else {
            print("the stranded partition's fetch start was dropped: it stays in the status")
            #expect(received.count == 10)
            #expect(consumer.status.strandedPartitions == [Self.stranded])
            #expect(consumer.strandedRestarts >= 2)
        }
        try await stack.close()
    }

    @Test("a restart the watch offers after its partition moved on is dropped: nothing is read twice")
    func aRestartOfAPartitionThatMovedSinceTheLookIsDropped() async throws {
        // A threshold the test never reaches: the only restart is the one offered below.
        let stack = try Stack(group: "stale-restart", threshold: .seconds(600))
        let (producer, consumer) = (stack.producer, stack.consumer)
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions)
        try consumer.subscribe(topics: ["in"])
        let received = try await receive(20, from: consumer, within: .seconds(30))
        #expect(Set(received.map(\.valueString)).count == 20)

        // What the watch offers after a look that saw the partition before its first record: its looks at
        // the brokers can take seconds, and the partition may have read all of its records meanwhile (CI saw
        // two read twice when the restart's seek took it back to the earliest).
        let core = consumer.core
        let assignment = try #require(core.assignedPartitions[Self.stranded]?.assignment)
        core.offerStranded(
            nil,
            restarting: [
                StrandedPartition(
                    partition: Self.stranded, assignment: assignment, position: RDKafkaClient.invalidOffset,
                    readFrom: 0)
            ])
        #expect(await eventually { !core.strandedOffered.load(ordering: .acquiring) })
        try await Self.expectNothingReadAgain(stack)
        #expect(consumer.strandedRestarts == 0)
        try await stack.close()
    }

    @Test("partitions kept through a long revoke, with records waiting, are not counted as stranded")
    func partitionsKeptThroughALongRevokeAreNotStranded() async throws {
        // While the poll thread waits for a revoke handler (the worker's waits up to `revoke_timeout` for
        // its in-flight pushes), it hands over no record of any partition: the partitions the consumer keeps
        // stand still with records beyond them, and librdkafka is not the reason. A storm test saw the
        // watch name two such partitions.
        let revoking = Recorder<Bool>()
        let handOver = Recorder<Bool>()
        let stack = try Stack(group: "long-revoke", threshold: .milliseconds(500)) { event in
            guard case .revoked(let revocation) = event else { return }
            revoking.append(true)
            while handOver.all.isEmpty, ContinuousClock.now < revocation.deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        let (producer, consumer, changes) = (stack.producer, stack.consumer, stack.changes)
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions, prefix: "before-")
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(20, from: consumer, within: .seconds(30)).count == 20)

        let joining = try stack.joiningConsumer()
        try joining.subscribe(topics: ["in"])
        #expect(await eventually { !revoking.all.isEmpty })
        try await produce(producer, topic: "in", count: 20, partitions: Self.partitions, prefix: "during-")
        // Enough checks for two looks at the brokers a threshold apart (one every 125 ms), all while the
        // revoke handler holds the poll thread.
        let checks = consumer.strandedChecks
        #expect(await eventually { consumer.strandedChecks >= checks + 16 })
        handOver.append(true)

        // The kept partition's ten records come once the revoke is over.
        #expect(try await receive(10, from: consumer, within: .seconds(30)).count == 10)
        let looks = consumer.strandedChecks
        #expect(await eventually { consumer.strandedChecks >= looks + 8 })
        #expect(changes.all.allSatisfy { !$0.strandedPartitionsChanged }, "\(changes.all.map(\.current))")
        #expect(consumer.strandedRestarts == 0)
        try await joining.close(deadline: .now + .seconds(10))
        try await stack.close()
    }

    /// Records produced now, one per partition, are the next the consumer reads: a restart that took a
    /// partition back to records it had handed over would put those first.
    static func expectNothingReadAgain(_ stack: Stack) async throws {
        try await produce(stack.producer, topic: "in", count: Int(partitions), partitions: partitions, prefix: "last-")
        let next = try await receive(Int(partitions), from: stack.consumer, within: .seconds(30))
        #expect(next.map(\.valueString).sorted() == (0..<Int(partitions)).map { "last-\($0)" }, "read again")
    }

    @Test("idle partitions with nothing to read, and partitions the owner paused, are never counted as stranded")
    func idleAndOwnerPausedPartitionsAreNotStranded() async throws {
        // Long enough for a partition's first fetch after the join (the mock cluster's connections come up
        // one by one): a partition counts as stranded after two looks a threshold apart, 2 s here.
        let stack = try Stack(group: "idle", threshold: .seconds(1))
        let (producer, consumer, changes) = (stack.producer, stack.consumer, stack.changes)
        try await produce(producer, topic: "in", count: 10, partitions: Self.partitions)
        try consumer.subscribe(topics: ["in"])
        #expect(try await receive(10, from: consumer, within: .seconds(30)).count == 10)

        // Partition 1 paused by its owner, with records waiting; partition 0 read to its end.
        try consumer.pause([Self.stranded])
        try await produce(producer, topic: "in", count: 10, partitions: Self.partitions, prefix: "held-")
        #expect(try await receive(5, from: consumer, within: .seconds(30)).count == 5)
        // Many checks and looks at the brokers (each a threshold apart) pass: none finds a stranded partition.
        let looks = consumer.strandedChecks
        #expect(await eventually(timeout: .seconds(30)) { consumer.strandedChecks >= looks + 20 })
        #expect(changes.all.allSatisfy { !$0.strandedPartitionsChanged }, "\(changes.all.map(\.current))")
        #expect(consumer.strandedRestarts == 0)

        // Resumed, its records come, and still nothing counted it.
        try consumer.resume([Self.stranded])
        #expect(try await receive(5, from: consumer, within: .seconds(30)).count == 5)
        #expect(changes.all.allSatisfy { !$0.strandedPartitionsChanged })
        try await stack.close()
    }
}
