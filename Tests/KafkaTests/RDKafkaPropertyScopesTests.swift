// The worker passes one property map to both of its clients; each must get only what applies to it.

import Testing

@testable import Kafka

@Suite struct RDKafkaPropertyScopesTests {
    @Test func scopesComeFromLibrdkafkasOwnTable() {
        // Hundreds of properties, global and topic-level.
        #expect(RDKafkaPropertyScopes.table.count > 100)
        #expect(RDKafkaPropertyScopes.table["fetch.wait.max.ms"] == .consumer)
        #expect(RDKafkaPropertyScopes.table["queued.max.messages.kbytes"] == .consumer)
        #expect(RDKafkaPropertyScopes.table["linger.ms"] == .producer)
        #expect(RDKafkaPropertyScopes.table["enable.idempotence"] == .producer)
        #expect(RDKafkaPropertyScopes.table["bootstrap.servers"] == .both)
        #expect(RDKafkaPropertyScopes.table["sasl.mechanisms"] == .both)
    }

    @Test func eachClientGetsItsOwnAndTheSharedProperties() {
        #expect(RDKafkaPropertyScopes.applies("fetch.wait.max.ms", to: .consumer))
        #expect(!RDKafkaPropertyScopes.applies("fetch.wait.max.ms", to: .producer))
        #expect(RDKafkaPropertyScopes.applies("linger.ms", to: .producer))
        #expect(!RDKafkaPropertyScopes.applies("linger.ms", to: .consumer))
        #expect(RDKafkaPropertyScopes.applies("security.protocol", to: .consumer))
        #expect(RDKafkaPropertyScopes.applies("security.protocol", to: .producer))
        // An unknown name goes through, so that librdkafka names it in its error.
        #expect(RDKafkaPropertyScopes.applies("no.such.property", to: .producer))
    }

    @Test func aProducerStillRefusesAnUnknownProperty() {
        var configuration = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: "127.0.0.1:1"))
        configuration.client.properties["no.such.property"] = "1"
        #expect(throws: KafkaError.self) { _ = try KafkaProducer(configuration: configuration) }
    }
}
