// What the Kafka clients' status changes mean to an operator: readiness conditions, gauges, and one log
// line per change (brokers reachable or not, group membership, stranded partitions, results waiting).

import JSON
import Kafka

extension WorkerRuntime {
    /// Updates readiness and metrics from a change of the consumer's status, and logs what changed.
    static func report(
        _ change: KafkaConsumerStatusChange, readiness: Readiness, metrics: WorkerMetrics, logger: Logger,
        progress: ShutdownProgress
    ) {
        let status = change.current
        metrics.kafkaBrokersUp.set(status.brokersUp)
        metrics.partitionsAssigned.set(status.partitionsAssigned)
        if change.strandedPartitionsChanged {
            reportStranded(change, readiness: readiness, metrics: metrics, logger: logger)
        }
        let brokerFields: JSONObject = [
            "brokers_up": .int(Int64(status.brokersUp)), "brokers_known": .int(Int64(status.brokersKnown)),
        ]
        if change.brokersReachabilityChanged {
            if status.brokersReachable {
                readiness.setReady(Readiness.Condition.kafkaBrokers)
                let first = change.previous.brokersKnown == 0
                let message = first ? "kafka brokers reachable" : "kafka brokers reachable again"
                logger.log(first ? .info : .notice, message, brokerFields, rateLimitKey: "kafka brokers")
            } else {
                let cause = status.brokersCause ?? "unknown"
                readiness.setNotReady(Readiness.Condition.kafkaBrokers, reason: "no Kafka broker answers: \(cause)")
                logger.warning("kafka brokers unreachable: \(cause)", brokerFields, rateLimitKey: "kafka brokers")
            }
        }
        if change.membershipChanged {
            if status.isGroupMember {
                readiness.setReady(Readiness.Condition.consumerGroup)
                let first = change.previous.membershipCause == KafkaConsumerStatus.initial.membershipCause
                logger.log(
                    first ? .info : .notice,
                    first
                        ? "kafka consumer joined its group"
                        : "kafka consumer group membership regained", [:], rateLimitKey: "kafka group")
            } else {
                let cause = status.membershipCause ?? "unknown"
                readiness.setNotReady(Readiness.Condition.consumerGroup, reason: "no group membership: \(cause)")
                // Leaving the group is what a shutdown does; it is logged as part of it.
                if !progress.hasStarted {
                    logger.warning("kafka consumer group membership lost: \(cause)", [:], rateLimitKey: "kafka group")
                }
            }
        }
    }

    /// Says when librdkafka stopped fetching partitions with records waiting (the consumer restarts them),
    /// and when they move again: logged once each way, in /readyz while any is stranded, and as a gauge.
    static func reportStranded(
        _ change: KafkaConsumerStatusChange, readiness: Readiness, metrics: WorkerMetrics, logger: Logger
    ) {
        let stranded = change.current.strandedPartitions
        metrics.partitionsStranded.set(stranded.count)
        let newly = stranded.filter { !change.previous.strandedPartitions.contains($0) }
        let moving = change.previous.strandedPartitions.filter { !stranded.contains($0) }
        if !newly.isEmpty {
            logger.warning(
                "kafka partitions hold records the consumer has fetched none of (librdkafka stopped fetching "
                    + "them); restarting their fetching",
                ["partitions": list(newly), "partitions_stranded": .int(Int64(stranded.count))])
        }
        if !moving.isEmpty {
            logger.notice("kafka partitions fetching again", ["partitions": list(moving)])
        }
        if stranded.isEmpty {
            readiness.setReady(Readiness.Condition.kafkaFetching)
        } else {
            readiness.setNotReady(
                Readiness.Condition.kafkaFetching,
                reason: "partitions with records waiting are not fetched: "
                    + stranded.map(\.description).joined(separator: ", ")
                    + " (the worker restarts their fetching; if this stays, restart the worker)")
        }
    }

    /// Updates readiness from a change of the producer's status, and logs it once.
    static func report(_ status: KafkaProducerStatus, unacknowledged: Int, readiness: Readiness, logger: Logger) {
        if status.isWaitingForBrokers {
            let seconds = Int((status.waitingFor ?? .zero).components.seconds)
            let cause = status.cause.map { ": \($0)" } ?? ""
            let message = "results wait for Kafka: \(unacknowledged) records unacknowledged for \(seconds) s"
            readiness.setNotReady(Readiness.Condition.kafkaProducer, reason: message + cause)
            logger.warning(message + cause, ["results_unacknowledged": .int(Int64(unacknowledged))])
        } else {
            readiness.setReady(Readiness.Condition.kafkaProducer)
            logger.notice("results acknowledged again", ["results_unacknowledged": .int(Int64(unacknowledged))])
        }
    }
}
