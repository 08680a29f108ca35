// Says in the log what a revoke left to the partitions' next owner: records released unsent (their pushes
// waited for APNs, a retry or a paced device) and records still running when the revoke's time ran out. The shutdown says the same in its own lines (WorkerRuntime.shutdown).

import JSON
import Kafka

/// A pipeline observer that logs each revoke that left records unfinished, once, and passes every event
/// on to `next`.
struct RevokeHandOverLog: PipelineObserver {
    let logger: Logger
    let next: (any PipelineObserver)?

    func recordsHandedOver(_ handOver: RecordsHandedOver) {
        if handOver.cause == .revoke {
            var fields: JSONObject = [
                "records_released_unsent": .int(Int64(handOver.releasedUnsentCount)),
                "records_left_running": .int(Int64(handOver.leftRunningCount)),
                "partitions": WorkerRuntime.list(
                    Set(handOver.releasedUnsent.keys).union(handOver.leftRunning.keys).map(KafkaTopicPartition.init)),
            ]
            if handOver.leftRunningCount > 0 {
                fields["left_running_partitions"] = WorkerRuntime.list(
                    handOver.leftRunning.keys.map(KafkaTopicPartition.init))
                logger.warning(
                    "revoked partitions had records still running when the revoke timeout passed (pushes on "
                        + "their way to APNs, or results Kafka had not acknowledged); they stay uncommitted and the "
                        + "partitions' next owner sends them again, so some devices may get a notification twice",
                    fields)
            } else {
                logger.info(
                    "revoked partitions had records whose pushes were waiting (for APNs, a retry or a paced device); "
                        + "they were released unsent and the partitions' next owner sends them",
                    fields)
            }
        }
        next?.recordsHandedOver(handOver)
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
