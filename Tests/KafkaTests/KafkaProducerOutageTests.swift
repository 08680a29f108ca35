// What the producer does while its brokers are away: it keeps records instead of failing them, says
// that they wait (and when they are acknowledged again), and tells failures that pass from those
// that do not.

import TestSupport
import Testing

@testable import Kafka

@Suite("KafkaProducer outages")
struct KafkaProducerOutageTests {
    @Test(
        "outages and timeouts are transient; authorization, unknown topics, fatal errors are permanent",
        arguments: [
            ("_MSG_TIMED_OUT", true), ("_TIMED_OUT", true), ("_TRANSPORT", true), ("_ALL_BROKERS_DOWN", true),
            ("_RESOLVE", true), ("_QUEUE_FULL", true), ("REQUEST_TIMED_OUT", true), ("NETWORK_EXCEPTION", true),
            ("LEADER_NOT_AVAILABLE", true), ("NOT_LEADER_FOR_PARTITION", true), ("NOT_ENOUGH_REPLICAS", true),
            ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", true), ("BROKER_NOT_AVAILABLE", true), ("KAFKA_STORAGE_ERROR", true),
            ("TOPIC_AUTHORIZATION_FAILED", false), ("CLUSTER_AUTHORIZATION_FAILED", false), ("_UNKNOWN_TOPIC", false),
            ("UNKNOWN_TOPIC_OR_PART", false), ("_UNKNOWN_PARTITION", false), ("MSG_SIZE_TOO_LARGE", false),
            ("INVALID_RECORD", false), ("POLICY_VIOLATION", false), ("_FATAL", false),
            ("OUT_OF_ORDER_SEQUENCE_NUMBER", false), ("INVALID_PRODUCER_EPOCH", false), ("_INCONSISTENT", false),
            ("_PURGE_QUEUE", false), ("_PURGE_INFLIGHT", false), ("_SSL", false), ("SASL_AUTHENTICATION_FAILED", false),
        ])
    func deliveryFailureClassification(name: String, transient: Bool) throws {
        let error = try #require(KafkaError.deliveryFailure(librdkafkaName: name), "librdkafka knows \(name)")
        #expect(error.producerFailureKind == (transient ? .transient : .permanent), "\(name)")
    }

    @Test("the module's own codes: a full queue passes; closed, fatal and too large do not")
    func ownCodeClassification() {
        #expect(KafkaError(code: .queueFull, message: "").producerFailureKind == .transient)
        for code in [KafkaError.Code.closed, .fatal, .messageTooLarge, .invalidConfiguration, .timeout] {
            #expect(KafkaError(code: code, message: "").producerFailureKind == .permanent, "\(code)")
        }
    }

    @Test("the producer waits forever by default; kafka.properties or a transactional id override it")
    func deliveryTimeoutProperty() {
        var configuration = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: "localhost:1"))
        #expect(configuration.librdkafkaProperties().last { $0.0 == "message.timeout.ms" }?.1 == "0")
        configuration.deliveryTimeout = .seconds(30)
        #expect(configuration.librdkafkaProperties().last { $0.0 == "message.timeout.ms" }?.1 == "30000")
        for property in ["message.timeout.ms", "delivery.timeout.ms", "transactional.id"] {
            var overridden = configuration
            overridden.client.properties[property] = "7000"
            let properties = overridden.librdkafkaProperties()
            #expect(!properties.contains { $0.0 == "message.timeout.ms" && $0.1 == "30000" }, "\(property)")
            #expect(properties.last { $0.0 == property }?.1 == "7000")
        }
    }

    @Test("records sent while every broker is down wait, are reported waiting once, and are all delivered after")
    func outageHoldsRecordsAndReportsTheWait() async throws {
        let cluster = try startCluster(brokers: 1, topic: "out", partitions: 2)
        var configuration = testProducerConfiguration(cluster)
        configuration.queueCapacity = 20
        configuration.acknowledgementWaitThreshold = .milliseconds(500)
        let changes = Recorder<KafkaProducerStatus>()
        let producer = try KafkaProducer(configuration: configuration, statusHandler: { changes.append($0) })
        #expect(await producer.prepare(topics: ["out"], timeout: .seconds(10)).isEmpty)
        try cluster.setBrokerDown(1)
        let results = Recorder<Result<KafkaDeliveryReport, KafkaError>>()
        // 50 records into a queue of 20: the sends beyond it wait for room instead of failing.
        let sender = Task {
            for index in 0..<50 {
                try await producer.send(topic: "out", key: nil, value: [UInt8(index)]) { results.append($0) }
            }
        }
        #expect(await eventually(timeout: .seconds(10)) { changes.all.count == 1 })
        let waiting = try #require(changes.all.first)
        #expect(waiting.isWaitingForBrokers)
        #expect(waiting.unacknowledged == 20)
        try await Task.sleep(for: .seconds(2))
        #expect(results.all.isEmpty)
        #expect(producer.status.unacknowledged == 20)
        try cluster.setBrokerUp(1)
        try await sender.value
        try await producer.flush(timeout: .seconds(20))
        #expect(results.all.count == 50)
        #expect(results.all.allSatisfy { (try? $0.get()) != nil })
        #expect(producer.status.unacknowledged == 0)
        #expect(changes.all.count == 2)
        #expect(changes.all.last?.isWaitingForBrokers == false)
        try await producer.close(timeout: .seconds(5))
    }

    @Test("records a short delivery timeout fails while brokers are away, sent again, count as one wait")
    func timedOutRecordsSentAgainAreOneWait() async throws {
        let cluster = try startCluster(brokers: 1, topic: "out", partitions: 1)
        var configuration = testProducerConfiguration(cluster)
        configuration.deliveryTimeout = .milliseconds(300)
        configuration.acknowledgementWaitThreshold = .seconds(1)
        let changes = Recorder<KafkaProducerStatus>()
        let producer = try KafkaProducer(configuration: configuration, statusHandler: { changes.append($0) })
        #expect(await producer.prepare(topics: ["out"], timeout: .seconds(10)).isEmpty)
        try cluster.setBrokerDown(1)
        let failures = Recorder<KafkaError>()
        let delivered = Recorder<KafkaDeliveryReport>()
        // What KafkaResultSink does: a failure that passes is sent again.
        // A send that throws ends the chain: kept, to say so if the count below falls short.
        let thrown = Recorder<String>()
        @Sendable func sendUntilDelivered() {
            Task {
                do {
                    try await producer.send(topic: "out", key: nil, value: [1]) { result in
                        switch result {
                        case .success(let report): delivered.append(report)
                        case .failure(let error):
                            failures.append(error)
                            if error.producerFailureKind == .transient { sendUntilDelivered() }
                        }
                    }
                } catch {
                    thrown.append("\(error)")
                }
            }
        }
        sendUntilDelivered()
        #expect(await eventually(timeout: .seconds(10)) { changes.all.count == 1 })
        // Each timeout is noticed by librdkafka's once-a-second scan, and each resend queues behind a busy
        // machine's other tests: three can take several seconds (10 s was too short once on a loaded CI run).
        let timedOutThrice = await eventually(timeout: .seconds(60)) { failures.all.count >= 3 }
        // Once on CI (librdkafka 2.16, the whole Kafka suite running beside it), no delivery report came at
        // all in the 60 s: the record stayed unacknowledged past its 300 ms message.timeout.ms with the
        // broker down, and was delivered once the broker came back (checked below). Alone, the test passed
        // 12 runs of 12 on 2.16. That is librdkafka not timing the record out, not a resend chain that
        // broke: a first failure with fewer than three after it still fails here.
        withKnownIssue(
            "librdkafka reported nothing for a record held past message.timeout.ms while the broker was down",
            isIntermittent: true
        ) {
            let detail =
                "failures \(failures.all.map(\.message)); sends that threw: \(thrown.all); producer: "
                + "\(producer.status), \(producer.queuedMessageCount) in librdkafka's out-queue"
            #expect(timedOutThrice, "\(detail)")
        } when: {
            failures.all.isEmpty && thrown.all.isEmpty
        }
        #expect(failures.all.allSatisfy { $0.librdkafkaName == "_MSG_TIMED_OUT" })
        #expect(changes.all.count == 1)
        try cluster.setBrokerUp(1)
        #expect(await eventually(timeout: .seconds(20)) { delivered.all.count == 1 })
        #expect(await eventually { changes.all.count == 2 })
        #expect(changes.all.last?.isWaitingForBrokers == false)
        try await producer.close(timeout: .seconds(5))
    }
}
