// Feeds the pipeline's events into the worker's Prometheus metrics, and fans out to another
// observer (the `dev` command's printer) when there is one.

import APNs
import Synchronization

struct MetricsObserver: PipelineObserver {
    let metrics: WorkerMetrics
    let next: (any PipelineObserver)?
    /// Pauses come for all partitions (the cap) or for one (a slow record); the gauge counts the union.
    private let paused = PausedPartitions()
    // The series counted once or more per notification, found by a cheap key.
    private let recordsConsumed: SeriesCache<String, Counter>
    private let outcomes: CaseSeries<OutcomeStatus, Counter>
    private let eventToOutcome: CaseSeries<OutcomeStatus, Histogram>
    /// `apns_requests_total` for the attempts APNs answered 200, by push type: nearly all of them.
    private let accepted: CaseSeries<PushType, Counter>
    private let requests: SeriesCache<RequestSeries, Counter>
    private let responseDuration: CaseSeries<APNsEnvironment, Histogram>

    /// The labels of `apns_requests_total`, before folding into their bounded sets.
    struct RequestSeries: Hashable {
        var pushType: PushType
        var httpStatus: Int?
        var reason: String?
    }

    init(metrics: WorkerMetrics, next: (any PipelineObserver)?) {
        self.metrics = metrics
        self.next = next
        recordsConsumed = SeriesCache(metrics.recordsConsumed) { [$0] }
        outcomes = CaseSeries(metrics.outcomes) { [$0.rawValue] }
        eventToOutcome = CaseSeries(metrics.eventToOutcome) { [$0.rawValue] }
        accepted = CaseSeries(metrics.apnsRequests) {
            WorkerMetrics.requestLabels(pushType: $0.rawValue, httpStatus: 200, reason: nil)
        }
        requests = SeriesCache(metrics.apnsRequests) {
            WorkerMetrics.requestLabels(pushType: $0.pushType.rawValue, httpStatus: $0.httpStatus, reason: $0.reason)
        }
        responseDuration = CaseSeries(metrics.apnsResponseDuration) { [$0.rawValue] }
    }

    func recordReceived(_ record: SourceRecord) {
        recordsConsumed[record.topic].increment()
        next?.recordReceived(record)
    }

    func outcomesPublished(_ published: PublishedOutcomes, eventTime: Double?) {
        published.forEachStatus { status, count in
            outcomes[status].increment(by: UInt64(count))
            if let eventTime {
                let seconds = max(0, published.completedAt - eventTime)
                for _ in 0..<count { eventToOutcome[status].observe(seconds) }
            }
        }
        next?.outcomesPublished(published, eventTime: eventTime)
    }

    var keepsOutcomeRecords: Bool { next?.keepsOutcomeRecords ?? false }

    func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {
        metrics.deadLetters.labels(errorClass).increment()
        next?.deadLettered(record, errorClass: errorClass, message: message)
    }

    func parked(_ record: SourceRecord, devices: Int, reason: String) {
        metrics.recordsParked.labels(WorkerMetrics.reasonLabel(reason)).increment()
        next?.parked(record, devices: devices, reason: reason)
    }

    func flowChanged(paused: Bool, partitions: [TopicPartition]) {
        metrics.partitionsPaused.set(self.paused.update(paused: paused, partitions))
        next?.flowChanged(paused: paused, partitions: partitions)
    }

    func recordsHandedOver(_ handOver: RecordsHandedOver) {
        let cause = handOver.cause.rawValue
        metrics.recordsReleasedUnsent.labels(cause).increment(by: UInt64(handOver.releasedUnsentCount))
        metrics.recordsLeftRunning.labels(cause).increment(by: UInt64(handOver.leftRunningCount))
        next?.recordsHandedOver(handOver)
    }

    /// One APNs attempt has ended (`APNsClient.Configuration.attemptObserver`): counted now, while the
    /// push may still be retrying, so that the request rate and response times follow APNs as it answers.
    func attemptEnded(_ request: APNsRequest, _ attempt: DeliveryAttempt) {
        if attempt.httpStatus == 200 && attempt.reason == nil {
            accepted[request.pushType].increment()
        } else {
            requests[RequestSeries(pushType: request.pushType, httpStatus: attempt.httpStatus, reason: attempt.reason)]
                .increment()
        }
        if attempt.httpStatus != nil { responseDuration[request.environment].observe(attempt.latency) }
    }

    /// A push is done: what only the whole push knows (its retries, a token APNs refused for good). Its
    /// attempts were counted one by one in `attemptEnded`.
    func delivered(_ result: DeliveryResult) {
        for retried in result.attempts.dropLast() {
            metrics.retries.labels(WorkerMetrics.reasonLabel(retried.reason)).increment()
        }
        // The pipeline makes an invalid-token event for exactly these results.
        if let reason = InvalidTokenRecord.invalidatingReason(of: result) {
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
