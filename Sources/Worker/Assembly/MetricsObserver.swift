// Feeds the pipeline's events into the worker's Prometheus metrics, and fans out to another
// observer (the `dev` command's printer) when there is one.
import APNs
import Synchronization

struct MetricsObserver: PipelineObserver {
    let metrics: WorkerMetrics
    let next: (any PipelineObserver)?
    /// Pauses come for all partitions (the cap) or for one (a slow record); the gauge counts the union.
    private let paused = PausedPartitions()

    init(metrics: WorkerMetrics, next: (any PipelineObserver)?) {
        self.metrics = metrics
        self.next = next
    }

    func recordReceived(_ record: SourceRecord) {
        metrics.recordsConsumed.labels(record.topic).increment()
        next?.recordReceived(record)
    }

    func outcomePublished(_ outcome: OutcomeRecord, eventTime: Double?) {
        metrics.outcomes.labels(outcome.status.rawValue).increment()
        if let eventTime {
            metrics.eventToOutcome.labels(outcome.status.rawValue).observe(max(0, outcome.completedAt - eventTime))
        }
        next?.outcomePublished(outcome, eventTime: eventTime)
    }

    func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {
        metrics.deadLetters.labels(errorClass).increment()
        next?.deadLettered(record, errorClass: errorClass, message: message)
    }

    func flowChanged(paused: Bool, partitions: [TopicPartition]) {
        metrics.partitionsPaused.set(self.paused.update(paused: paused, partitions))
        next?.flowChanged(paused: paused, partitions: partitions)
    }

    /// Every attempt of a send: requests by type/status/reason, retries, response times.
    func delivered(_ push: PlannedPush, _ result: DeliveryResult) {
        let pushType = push.request.pushType.rawValue
        for (index, attempt) in result.attempts.enumerated() {
            metrics.countRequest(pushType: pushType, httpStatus: attempt.httpStatus, reason: attempt.reason)
            metrics.apnsResponseDuration.labels(push.request.environment.rawValue).observe(attempt.latency)
            if index > 0 { metrics.retries.labels(WorkerMetrics.reasonLabel(result.attempts[index - 1].reason)).increment() }
        }
        if let reason = result.response?.reason, result.response?.reasonClass == .invalidToken {
            metrics.invalidTokens.labels(reason.rawValue).increment()
        }
    }
}

/// The partitions paused now, for the gauge.
final class PausedPartitions: Sendable {
    private let partitions = Mutex<Set<TopicPartition>>([])

    /// Applies a pause or resume; returns how many partitions are paused after it.
    func update(paused: Bool, _ changed: [TopicPartition]) -> Int {
        partitions.withLock { set in
            if paused { set.formUnion(changed) } else { set.subtract(changed) }
            return set.count
        }
    }
}
