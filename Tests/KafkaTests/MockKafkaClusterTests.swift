// The mock cluster's own API: addresses, topic creation, broker control and its errors, stop.

import Dispatch
import Kafka
import Synchronization
import TestSupport
import Testing

@Suite("MockKafkaCluster")
struct MockKafkaClusterTests {
    @Test("bootstrap servers list one loopback address per broker")
    func bootstrapServersAreLoopback() async throws {
        let cluster = try MockKafkaCluster(brokers: 3)
        let servers = cluster.bootstrapServers.split(separator: ",")
        #expect(servers.count == 3)
        for server in servers {
            #expect(server.hasPrefix("127.0.0.1:"))
            #expect((Int(server.dropFirst("127.0.0.1:".count)) ?? 0) > 0)
        }
        await cluster.stop()
    }

    @Test("bad arguments are rejected with what would be right")
    func badArgumentsAreExplained() throws {
        let cluster = try MockKafkaCluster(brokers: 2)
        let replication = #expect(throws: KafkaError.self) {
            try cluster.createTopic("t", partitions: 3, replicationFactor: 3)
        }
        #expect(replication?.message.contains("1...2") == true)
        let partitions = #expect(throws: KafkaError.self) { try cluster.createTopic("t", partitions: 0) }
        #expect(partitions?.message.contains("at least 1 partition") == true)
        let broker = #expect(throws: KafkaError.self) { try cluster.setBrokerDown(3) }
        #expect(broker?.message.contains("broker ids are 1...2") == true)
        let size = #expect(throws: KafkaError.self) { _ = try MockKafkaCluster(brokers: 0) }
        #expect(size?.code == .mockCluster)
    }

    /// A child that starts while a broker is taken down holds the broker's listener across the mock's
    /// re-bind of its port, which then fails, and librdkafka aborts the process; `ChildSpawnFence` keeps
    /// the two apart. Without it this test killed its process in 5 runs of 5, each within 3 s of its start
    /// (a cycle takes about 0.25 s). Few cycles: the spawning loads the machine the other tests run on.
    @Test("taking brokers down while child processes start does not abort the process")
    func brokerDownWhileChildrenStart() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        let cycles = 12
        let state = Mutex((done: false, started: 0, failures: [Int32]()))
        let spawner = DispatchGroup()
        DispatchQueue.global().async(group: spawner) {
            while !state.withLock({ $0.done }) {
                let status = (try? runProcess("/bin/true", [])) ?? -1
                state.withLock {
                    $0.started += 1
                    if status != 0 { $0.failures.append(status) }
                }
            }
        }
        // The first child has started, so that every cycle below overlaps the spawning.
        while state.withLock({ $0.started }) == 0 { await Task.yield() }
        for _ in 0..<cycles {
            try cluster.setBrokerDown(1)
            try cluster.setBrokerUp(1)
        }
        state.withLock { $0.done = true }
        await withCheckedContinuation { continuation in spawner.notify(queue: .global()) { continuation.resume() } }
        let (started, failures) = state.withLock { ($0.started, $0.failures) }
        print("mock broker down/up: \(cycles) cycles while \(started) children started")
        #expect(failures.isEmpty)
        await cluster.stop()
    }

    @Test("a created topic has the requested partitions")
    func createdTopicHasPartitions() async throws {
        let cluster = try startCluster(topic: "t", partitions: 5)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        _ = try await producer.send(topic: "t", key: nil, value: [1], partition: 4)
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: "t", key: nil, value: [1], partition: 5)
        }
        #expect(error?.librdkafkaName == "_UNKNOWN_PARTITION")
        try await producer.close(timeout: .seconds(2))
    }

    @Test("after stop the cluster refuses changes")
    func stoppedClusterRefusesChanges() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        await cluster.stop()
        await cluster.stop()
        let error = #expect(throws: KafkaError.self) { try cluster.createTopic("t", partitions: 1) }
        #expect(error?.code == .closed)
    }
}
