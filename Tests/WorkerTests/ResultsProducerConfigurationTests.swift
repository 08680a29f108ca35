// The results producer lingers 20 ms unless kafka.properties says otherwise (under either of librdkafka's
// names), read back from librdkafka itself; exactly-once mode adds the transactional id.

import Kafka
import Testing

@testable import Worker

@Suite struct ResultsProducerConfigurationTests {
    /// What librdkafka applied for `name` on a producer built as the worker builds its results producer.
    func applied(_ name: String, properties: [String: String] = [:], exactlyOnce: Bool = false) throws -> String? {
        var kafka = WorkerConfiguration.Kafka(brokers: ["127.0.0.1:1"])
        kafka.exactlyOnce = exactlyOnce
        var client = KafkaConfiguration(bootstrapServers: "127.0.0.1:1")
        for (key, value) in properties { client[property: key] = value }
        let producer = try KafkaProducer(configuration: WorkerRuntime.producerConfiguration(client: client, kafka))
        return producer.appliedProperty(name)
    }

    @Test func lingersTwentyMillisecondsByDefault() throws {
        #expect(try applied("linger.ms") == "20")
        #expect(try applied("enable.idempotence") == "true")
    }

    @Test func aConfiguredLingerWinsUnderEitherName() throws {
        #expect(try applied("linger.ms", properties: ["linger.ms": "3"]) == "3")
        #expect(try applied("linger.ms", properties: ["queue.buffering.max.ms": "7"]) == "7")
    }

    @Test func exactlyOnceModeNamesItsTransactions() throws {
        let id = try applied("transactional.id", exactlyOnce: true)
        #expect(id?.hasPrefix("apns-worker-") == true)
        #expect(try applied("transactional.id") ?? "" == "")
    }
}
