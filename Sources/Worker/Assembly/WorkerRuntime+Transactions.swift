// Exactly-once mode's parts of the assembly: the producer's transactional.id and the transactional sink,
// with its metrics, readiness and log lines.

import Foundation
import Kafka

extension WorkerRuntime {
    /// Offsets are committed only inside the transactions that write the results (see KafkaTransactionalSink);
    /// parked records on the retry topic are read only once their transaction committed.
    static func commitOnlyInTransactions(_ consumer: inout KafkaConsumerConfiguration) {
        consumer.enableAutoCommit = false
        consumer.client.properties["isolation.level"] = "read_committed"
    }

    /// Registers the transactional.id, which fences an earlier instance with it and aborts what that one
    /// left open; nothing to do in the default mode.
    func startTransactions() async throws {
        guard let transactions else { return }
        try await transactions.start(timeout: .seconds(30))
        logger.info(
            "kafka transactions ready (exactly-once results)",
            ["transactional_id": .string(Self.transactionalID(configuration.kafka))])
    }

    /// The producer's `transactional.id`: one per worker instance, and the same again when that instance
    /// restarts, so that the restarted producer's `init_transactions` fences its predecessor at once and aborts
    /// the transaction the predecessor left open (read_committed readers would otherwise wait for it up to
    /// `transaction.timeout.ms`). Built from the group and `kafka.group_instance_id` (the pod name in the
    /// chart) when set, else the host name (a pod's name too). Zombies are fenced in any case by the group
    /// metadata that goes with the offsets (KIP-447): this id only has to be unique among live instances.
    static func transactionalID(_ kafka: WorkerConfiguration.Kafka) -> String {
        let instance = kafka.groupInstanceID.isEmpty ? ProcessInfo.processInfo.hostName : kafka.groupInstanceID
        return "apns-worker-\(kafka.group)-\(instance)"
    }

    /// The transactional sink in exactly-once mode (its gauge registered), nil in the default mode.
    static func transactionalSink(
        _ configuration: WorkerConfiguration, producer: KafkaProducer, consumer: KafkaConsumer,
        metrics: WorkerMetrics, readiness: Readiness, logger: Logger
    ) -> KafkaTransactionalSink? {
        guard configuration.kafka.exactlyOnce else { return nil }
        let committed = metrics.kafkaTransactions.labels("committed")
        let aborted = metrics.kafkaTransactions.labels("aborted")
        let fatal = metrics.kafkaTransactions.labels("fatal")
        let interval = Duration.milliseconds(Int64(configuration.kafka.transactionInterval * 1000))
        let sink = KafkaTransactionalSink(
            producer: producer, groupMetadata: { consumer.groupMetadata() }, interval: interval,
            afterRecords: configuration.effectiveCommitAfterRecords,
            onEvent: { event in
                switch event {
                case .committed:
                    committed.increment()
                case .aborted(let cause):
                    aborted.increment()
                    // Each abort once, with its cause; the same held results go in the next transaction.
                    logger.warning(
                        "kafka transaction aborted; its results are produced again in the next one: \(cause)", [:])
                case .fatal(let reason):
                    fatal.increment()
                    // Logged once, by the worker's stop on the pipeline's fatal error (the sink's `failure`).
                    readiness.setNotReady(Readiness.Condition.kafkaProducer, reason: reason)
                }
            })
        metrics.registry.onCollect { metrics.resultsHeld.set(sink.heldRecords) }
        return sink
    }
}
