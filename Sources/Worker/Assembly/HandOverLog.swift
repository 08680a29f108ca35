// Says in the log what a revoke or a shutdown left to the partitions' next owner: records released unsent
// (their pushes waited for APNs, a retry or a paced device) and records still running when the time ran
// out. One mechanism for both causes: the metrics count the same event (MetricsObserver).

import JSON
import Kafka

/// A pipeline observer that logs each revoke or drain that left records unfinished, once per cause and
/// kind, and passes every event on to `next`.
struct HandOverLog: PipelineObserver {
    /// Where revokes are logged (component `kafka`).
    let revokeLogger: Logger
    /// Where the drain's hand-over is logged (component `shutdown`), with the drain's timeout it ran out.
    let shutdownLogger: Logger
    let drainTimeout: Double
    let next: (any PipelineObserver)?

    func recordsHandedOver(_ handOver: RecordsHandedOver) {
        switch handOver.cause {
        case .revoke: logRevoke(handOver)
        case .shutdown: logShutdown(handOver)
        }
        next?.recordsHandedOver(handOver)
    }

    private func logRevoke(_ handOver: RecordsHandedOver) {
        var fields: JSONObject = [
            "records_released_unsent": .int(Int64(handOver.releasedUnsentCount)),
            "records_left_running": .int(Int64(handOver.leftRunningCount)),
            "partitions": WorkerRuntime.list(
                Set(handOver.releasedUnsent.keys).union(handOver.leftRunning.keys).map(KafkaTopicPartition.init)),
        ]
        if handOver.leftRunningCount > 0 {
            fields["left_running_partitions"] = WorkerRuntime.list(
                handOver.leftRunning.keys.map(KafkaTopicPartition.init))
            revokeLogger.warning(
                "revoked partitions had records still running when the revoke timeout passed (pushes on "
                    + "their way to APNs, or results Kafka had not acknowledged); they stay uncommitted and the "
                    + "partitions' next owner sends them again, so some devices may get a notification twice",
                fields)
        } else {
            revokeLogger.info(
                "revoked partitions had records whose pushes were waiting (for APNs, a retry or a paced device); "
                    + "they were released unsent and the partitions' next owner sends them",
                fields)
        }
    }

    private func logShutdown(_ handOver: RecordsHandedOver) {
        if handOver.releasedUnsentCount > 0 {
            shutdownLogger.info(
                "records whose pushes were waiting (for APNs, a retry or a paced device) were released "
                    + "unsent; they stay uncommitted and the group's next owner sends them",
                [
                    "records_released": .int(Int64(handOver.releasedUnsentCount)),
                    "partitions": WorkerRuntime.list(handOver.releasedUnsent.keys.map(KafkaTopicPartition.init)),
                ])
        }
        guard handOver.leftRunningCount > 0 else { return }
        shutdownLogger.warning(
            "the drain timeout passed with records unfinished; they stay uncommitted "
                + "and the group's next owner processes them again",
            [
                "records_left": .int(Int64(handOver.leftRunningCount)),
                "partitions_left": .int(Int64(handOver.leftRunning.count)),
                "partitions": WorkerRuntime.list(handOver.leftRunning.keys.map(KafkaTopicPartition.init)),
                "drain_timeout_seconds": .double(drainTimeout),
            ])
    }

    func recordReceived(_ record: SourceRecord) { next?.recordReceived(record) }

    func outcomesPublished(_ outcomes: PublishedOutcomes, eventTime: Double?) {
        next?.outcomesPublished(outcomes, eventTime: eventTime)
    }

    var keepsOutcomeRecords: Bool { next?.keepsOutcomeRecords ?? false }

    func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {
        next?.deadLettered(record, errorClass: errorClass, message: message)
    }

    func flowChanged(paused: Bool, partitions: [TopicPartition]) {
        next?.flowChanged(paused: paused, partitions: partitions)
    }

    func parked(_ record: SourceRecord, devices: Int, reason: String) {
        next?.parked(record, devices: devices, reason: reason)
    }
}
