// The idempotent producer against the mock cluster: delivery reports, the callback API, flush,
// close, and a broker outage that loses nothing.

import Synchronization
import TestSupport
import Testing

@testable import Kafka

@Suite("KafkaProducer")
struct KafkaProducerTests {
    @Test("every record gets a delivery report with a distinct, contiguous offset per partition")
    func deliveryReportsForEveryRecord() async throws {
        let cluster = try startCluster(topic: "out", partitions: 4)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        let reports = try await produce(producer, topic: "out", count: 400, partitions: 4)
        #expect(reports.count == 400)
        for partition in Int32(0)..<4 {
            let offsets = reports.filter { $0.partition == partition }.compactMap(\.offset).sorted()
            #expect(offsets == Array(0..<100), "partition \(partition)")
        }
        #expect(reports.allSatisfy { $0.topic == "out" })
        try await producer.close(timeout: .seconds(5))
    }

    @Test("the callback API reports each record once, on delivery, and flush waits for all of them")
    func callbackDeliveryAndFlush() async throws {
        let cluster = try startCluster(topic: "out", partitions: 2)
        var configuration = testProducerConfiguration(cluster)
        configuration.linger = .milliseconds(200)  // so records are still queued when flush starts
        let producer = try KafkaProducer(configuration: configuration)
        let results = Recorder<Result<KafkaDeliveryReport, KafkaError>>()
        for index in 0..<200 {
            try await producer.send(topic: "out", key: nil, value: Array("v\(index)".utf8)) { results.append($0) }
        }
        #expect(results.all.count < 200)
        try await producer.flush(timeout: .seconds(10))
        #expect(results.all.count == 200)
        #expect(producer.queuedMessageCount == 0)
        let reports = results.all.compactMap { try? $0.get() }
        #expect(reports.count == 200)
        #expect(Set(reports.map { "\($0.partition):\($0.offset ?? -1)" }).count == 200)
        try await producer.close(timeout: .seconds(5))
    }

    @Test("prepare looks output topics up before the first send and names each one it cannot reach")
    func prepareLooksTopicsUp() async throws {
        let cluster = try startCluster(topic: "out", partitions: 3)
        try cluster.createTopic("side", partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        #expect(await producer.prepare(topics: ["out", "side"], timeout: .seconds(10)).isEmpty)
        let reports = try await produce(producer, topic: "out", count: 30, partitions: 3)
        #expect(reports.count == 30)

        for broker in Int32(1)...3 { try cluster.setBrokerDown(broker) }
        let problems = await producer.prepare(topics: ["elsewhere"], timeout: .milliseconds(500))
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("elsewhere: ") == true, "\(problems)")
        for broker in Int32(1)...3 { try cluster.setBrokerUp(broker) }
        try await producer.close(timeout: .seconds(5))
    }

    @Test("records sent while every broker is down for 3 s are all delivered once the brokers return")
    func brokerOutageLosesNothing() async throws {
        let cluster = try startCluster(topic: "out", partitions: 6)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "out", count: 100, partitions: 6, prefix: "before")

        for broker in Int32(1)...3 { try cluster.setBrokerDown(broker) }
        let outage = Task {
            try await Task.sleep(for: .seconds(3))
            for broker in Int32(1)...3 { try cluster.setBrokerUp(broker) }
        }
        let clock = ContinuousClock()
        let start = clock.now
        let reports = try await produce(producer, topic: "out", count: 300, partitions: 6, prefix: "during")
        let waited = clock.now - start
        try await outage.value
        #expect(reports.count == 300)
        #expect(waited >= .seconds(2), "the sends should have waited for the brokers, took \(waited)")
        try await producer.close(timeout: .seconds(5))

        // Read everything back: exactly 400 records, no loss and no duplicate.
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: "audit"))
        try consumer.subscribe(topics: ["out"])
        let received = try await receive(400, from: consumer, within: .seconds(15))
        #expect(received.count == 400)
        let values = Set(received.map(\.valueString))
        #expect(values.count == 400)
        #expect(values.contains("before0") && values.contains("during299"))
        try await consumer.close()
    }

    @Test("a fatal error is reported once, kept in fatalError, and fails every later send")
    func fatalErrorStopsTheProducer() async throws {
        let cluster = try startCluster(topic: "out", partitions: 1)
        let fatals = Recorder<KafkaError>()
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster)) { event in
            if case .fatal(let error) = event { fatals.append(error) }
        }
        _ = try await producer.send(topic: "out", key: nil, value: [1])
        #expect(producer.fatalError == nil)

        producer.raiseFatalErrorForTesting(reason: "sequence gap")
        #expect(await eventually { !fatals.all.isEmpty })
        #expect(fatals.all.count == 1)
        let fatal = try #require(producer.fatalError)
        #expect(fatal.code == .fatal)
        #expect(fatal.librdkafkaName == "OUT_OF_ORDER_SEQUENCE_NUMBER")
        #expect(fatal.message.contains("sequence gap"))
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: "out", key: nil, value: [2])
        }
        #expect(error?.code == .fatal)
        try? await producer.close(timeout: .seconds(1))
    }

    @Test("send after close fails with .closed")
    func sendAfterCloseFails() async throws {
        let cluster = try startCluster(topic: "out", partitions: 1)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await producer.close(timeout: .seconds(5))
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: "out", key: nil, value: [1])
        }
        #expect(error?.code == .closed)
    }

    @Test("a full local queue makes send wait, then fail with .queueFull naming the capacity")
    func fullQueueTimesOut() async throws {
        let cluster = try startCluster(topic: "out", partitions: 1)
        try cluster.setBrokerDown(1)
        try cluster.setBrokerDown(2)
        try cluster.setBrokerDown(3)
        var configuration = testProducerConfiguration(cluster)
        configuration.queueCapacity = 5
        configuration.enqueueTimeout = .milliseconds(300)
        let producer = try KafkaProducer(configuration: configuration)
        let reports = Atomic<Int>(0)
        for index in 0..<5 {
            try await producer.send(topic: "out", key: nil, value: [UInt8(index)]) { _ in
                reports.wrappingAdd(1, ordering: .relaxed)
            }
        }
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: KafkaError.self) {
            try await producer.send(topic: "out", key: nil, value: [9]) { _ in }
        }
        #expect(error?.code == .queueFull)
        #expect(error?.message.contains("queueCapacity 5") == true)
        #expect(clock.now - start >= .milliseconds(300))
        // Closing purges the five waiting records; their callbacks run (with a failure).
        try? await producer.close(timeout: .milliseconds(100))
        // Records, not librdkafka's out-queue length: that also counts callbacks not yet served, and an
        // error event ("all brokers are down") queued after the close left it at 1 with every record
        // reported (once in seven full runs on 2.0.2). The out-queue length is printed for a failure.
        let unacknowledged = producer.status.unacknowledged
        let reported = reports.load(ordering: .relaxed)
        let outQueue = producer.queuedMessageCount
        #expect(
            unacknowledged == 0,
            "\(unacknowledged) records unacknowledged after close (out queue \(outQueue)); \(reported) of 5 reported")
        #expect(reported == 5, "\(reported) of the 5 purged records got their delivery report")
    }
}
