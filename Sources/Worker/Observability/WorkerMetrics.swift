// Every metric the worker exposes, defined in one place (names, help, labels, buckets), so the pipeline
// bumps fields of one object and the README's table can be checked against this file.

/// The worker's metric set, registered on one `MetricsRegistry`.
///
/// Label values must come from bounded sets: topics, push types, HTTP statuses, APNs reasons, rule ids,
/// partitions, pool and credential names from the config. Never device tokens, event ids or free text;
/// the `*Label(_:)` functions fold anything unexpected into `other`.
///
/// - Important: Thread-safe. Resolve children once where the labels are known ahead
///   (`recordsConsumed.labels(topic)` when a partition is assigned) and keep them for the hot path.
public final class WorkerMetrics: Sendable {
    /// Every series name starts with this.
    public static let prefix = "apns_worker_"

    public let registry: MetricsRegistry

    /// `apns_worker_records_consumed_total{topic}`: input records taken from Kafka.
    public let recordsConsumed: CounterFamily
    /// `apns_worker_apns_requests_total{push_type,status,reason}`: APNs requests answered or failed, one per
    /// attempt, counted as each attempt ends (not when its push is done). `status` is the HTTP status
    /// (`statusLabel`), `reason` APNs' reason or the transport error (`reasonLabel`).
    public let apnsRequests: CounterFamily
    /// `apns_worker_retries_total{reason}`: attempts sent again after a retryable failure, counted when the
    /// push is done (only then is it known which attempts were retried).
    public let retries: CounterFamily
    /// `apns_worker_outcomes_total{status}`: outcome records produced: delivered, rejected, failed, expired, skipped.
    public let outcomes: CounterFamily
    /// `apns_worker_dead_letters_total{error_class}`: input records sent to the dead-letter topic.
    public let deadLetters: CounterFamily
    /// `apns_worker_invalid_tokens_total{reason}`: invalid-token events produced.
    public let invalidTokens: CounterFamily
    /// `apns_worker_rule_matches_total{rule_id}`: events a rule matched.
    public let ruleMatches: CounterFamily
    /// `apns_worker_rules_reloads_total{result}`: rules-file reloads, `result` is `success` or `failure`.
    public let rulesReloads: CounterFamily
    /// `apns_worker_apns_requests_in_flight`: APNs requests on a stream and not yet answered, across every
    /// pool; set at scrape time from the pools' statistics.
    public let requestsInFlight: Gauge
    /// `apns_worker_records_in_flight`: input records taken and not yet finished.
    public let recordsInFlight: Gauge
    /// `apns_worker_records_in_flight_limit`: the in-flight cap in force (it follows the APNs pools'
    /// capacity, within `pipeline.max_in_flight_records`).
    public let recordsInFlightLimit: Gauge
    /// `apns_worker_partitions_paused`: partitions paused because the in-flight cap was reached.
    public let partitionsPaused: Gauge
    /// `apns_worker_consumer_lag_records{topic,partition}`: records between this consumer's position and the
    /// partition's high watermark. Remove a partition's child when it is revoked.
    public let consumerLag: GaugeFamily
    /// `apns_worker_apns_connections_open{pool}`: open HTTP/2 connections per pool (`environment/credential`),
    /// ready or draining; set at scrape time from the pools' statistics.
    public let connectionsOpen: GaugeFamily
    /// `apns_worker_apns_connections_connecting{pool}`: connections a pool has opened that are not ready yet
    /// (TCP, proxy tunnel, TLS, the server's first SETTINGS); set at scrape time. A pool that grows opens
    /// several at once, and against a far APNs each takes its round trips.
    public let connectionsConnecting: GaugeFamily
    /// `apns_worker_apns_requests_queued`: APNs requests waiting in a pool for a free stream, across every
    /// pool; set at scrape time. Rising while in-flight stays flat means the connections are full.
    public let requestsQueued: Gauge
    /// `apns_worker_apns_devices_throttled`: device tokens whose pushes are paced because APNs answered
    /// them 429 TooManyRequests (`DeviceThrottle`); set at scrape time.
    public let devicesThrottled: Gauge
    /// `apns_worker_build_info{version}`: always 1; the label carries `WorkerVersion.current`.
    public let buildInfo: Gauge
    /// `apns_worker_provider_token_age_seconds{credential}`: age of the JWT currently in use; set it from
    /// `registry.onCollect` so that it is current at every scrape.
    public let providerTokenAge: GaugeFamily
    /// `apns_worker_certificate_expiry_timestamp_seconds{credential}`: the client certificate's notAfter,
    /// in unix seconds.
    public let certificateExpiry: GaugeFamily
    /// `apns_worker_apns_response_duration_seconds{environment}`: from sending a request to its response, for
    /// attempts that got one (a connect failure's or a timeout's duration says nothing about APNs' speed;
    /// those attempts show in `apns_requests_total` with status `none`).
    public let apnsResponseDuration: HistogramFamily
    /// `apns_worker_event_to_outcome_seconds{status}`: from the event's `occurred_at` (or, without one, from
    /// when the record was consumed) to its outcome.
    public let eventToOutcome: HistogramFamily
    /// `apns_worker_kafka_brokers_up`: Kafka brokers the consumer has a connection up to (0: none answers).
    public let kafkaBrokersUp: Gauge
    /// `apns_worker_partitions_assigned`: partitions of the input topics assigned to this consumer.
    public let partitionsAssigned: Gauge
    /// `apns_worker_kafka_partitions_stranded`: assigned partitions librdkafka has stopped fetching (no
    /// progress while the brokers hold records for them; see `KafkaConsumerStatus.strandedPartitions`).
    public let partitionsStranded: Gauge

    // Faults that pass: pools that cannot reach APNs and the pushes waiting for them.
    /// `apns_worker_apns_breaker_state{pool,state}`: 1 for the state each pool's circuit breaker is in
    /// (`closed`, `half_open`, `open`), 0 for the others.
    public let apnsBreakerState: GaugeFamily
    /// `apns_worker_pushes_held`: pushes waiting for a pool whose breaker is open (not attempts, not failed).
    public let pushesHeld: Gauge
    /// `apns_worker_apns_credentials_refused`: pools whose credential APNs refuses now (403 InvalidProviderToken,
    /// BadCertificate, ...), until a push of theirs is accepted again.
    public let credentialsRefused: Gauge
    /// `apns_worker_records_parked_total{reason}`: records sent to the retry topic because APNs refused the
    /// credential of some of their pushes (`reason`: Apple's, e.g. `InvalidProviderToken`).
    public let recordsParked: CounterFamily
    /// `apns_worker_records_released_unsent_total{cause}`: records whose pushes were waiting (for APNs, a
    /// retry or a paced device) when their partition went (`cause`: `revoke`, `shutdown`): withdrawn unsent
    /// and left uncommitted for the partition's next owner, which sends them.
    public let recordsReleasedUnsent: CounterFamily
    /// `apns_worker_records_left_running_total{cause}`: records still running (pushes on their way to APNs,
    /// results not yet acknowledged by Kafka) when the revoke's or the drain's time ran out: uncommitted, so
    /// the next owner sends them again (a duplicate is possible).
    public let recordsLeftRunning: CounterFamily

    // Results waiting for Kafka: a broker outage on the output side holds them, it does not fail them.
    /// `apns_worker_results_unacknowledged`: result records (outcomes, invalid tokens, dead letters) handed
    /// to the producer whose delivery Kafka has not acknowledged yet.
    public let resultsUnacknowledged: Gauge
    /// `apns_worker_kafka_transactions_total{result}`: exactly-once mode's transactions, by how they ended
    /// (`committed`, `aborted`: its results are produced again in the next; `fatal`: the worker stops).
    public let kafkaTransactions: CounterFamily
    /// `apns_worker_results_held`: exactly-once mode: records whose results wait for their transaction.
    public let resultsHeld: Gauge

    /// Response times of APNs: a few ms on a warm connection, up to the request timeout.
    public static let responseDurationBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// End-to-end latency includes Kafka lag and retries with backoff: up to many minutes.
    public static let eventToOutcomeBuckets: [Double] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900]

    /// Registers the whole set on `registry` (a fresh one by default).
    ///
    /// - Throws: `MetricsRegistryError` if `registry` already holds one of these names.
    public init(registry: MetricsRegistry = MetricsRegistry()) throws(MetricsRegistryError) {
        self.registry = registry
        let p = Self.prefix
        recordsConsumed = try registry.counter(
            p + "records_consumed_total", help: "Input records taken from Kafka.", labelNames: ["topic"])
        apnsRequests = try registry.counter(
            p + "apns_requests_total",
            help: "APNs request attempts by push type, HTTP status (none: no response) and APNs reason.",
            labelNames: ["push_type", "status", "reason"])
        retries = try registry.counter(
            p + "retries_total", help: "APNs requests scheduled again after a retryable failure, by reason.",
            labelNames: ["reason"])
        outcomes = try registry.counter(
            p + "outcomes_total",
            help: "Outcome records produced, by status (delivered, rejected, failed, expired, skipped).",
            labelNames: ["status"])
        deadLetters = try registry.counter(
            p + "dead_letters_total", help: "Input records sent to the dead-letter topic, by error class.",
            labelNames: ["error_class"])
        invalidTokens = try registry.counter(
            p + "invalid_tokens_total", help: "Invalid-token events produced, by APNs reason.",
            labelNames: ["reason"])
        ruleMatches = try registry.counter(
            p + "rule_matches_total", help: "Events matched by a rule, by rule id.", labelNames: ["rule_id"],
            maxLabelSets: 500)
        rulesReloads = try registry.counter(
            p + "rules_reloads_total", help: "Rules file reloads, by result (success, failure).",
            labelNames: ["result"])
        requestsInFlight = try registry.gauge(
            p + "apns_requests_in_flight", help: "APNs requests sent on a stream and not yet answered."
        ).labels()
        recordsInFlight = try registry.gauge(
            p + "records_in_flight", help: "Input records taken from Kafka and not yet finished."
        ).labels()
        recordsInFlightLimit = try registry.gauge(
            p + "records_in_flight_limit",
            help: "The in-flight cap in force: what the APNs pools can carry, within max_in_flight_records."
        ).labels()
        partitionsPaused = try registry.gauge(
            p + "partitions_paused", help: "Partitions paused because the in-flight cap was reached."
        ).labels()
        consumerLag = try registry.gauge(
            p + "consumer_lag_records", help: "Records between the consumer position and the high watermark.",
            labelNames: ["topic", "partition"], maxLabelSets: 4096)
        connectionsOpen = try registry.gauge(
            p + "apns_connections_open",
            help: "Open HTTP/2 connections to APNs (ready or draining), by pool (environment/credential).",
            labelNames: ["pool"])
        connectionsConnecting = try registry.gauge(
            p + "apns_connections_connecting",
            help: "HTTP/2 connections to APNs opened and not ready yet, by pool (environment/credential).",
            labelNames: ["pool"])
        requestsQueued = try registry.gauge(
            p + "apns_requests_queued", help: "APNs requests waiting in a pool for a free HTTP/2 stream."
        ).labels()
        devicesThrottled = try registry.gauge(
            p + "apns_devices_throttled",
            help: "Device tokens whose pushes are paced after APNs answered them 429 TooManyRequests."
        ).labels()
        buildInfo = try registry.gauge(
            p + "build_info", help: "Always 1; the version label says which apns-worker this is.",
            labelNames: ["version"]
        ).labels(WorkerVersion.current)
        buildInfo.set(1)
        providerTokenAge = try registry.gauge(
            p + "provider_token_age_seconds", help: "Age of the provider token (JWT) in use, by credential.",
            labelNames: ["credential"])
        certificateExpiry = try registry.gauge(
            p + "certificate_expiry_timestamp_seconds",
            help: "When the APNs client certificate expires, in unix seconds, by credential.",
            labelNames: ["credential"])
        apnsResponseDuration = try registry.histogram(
            p + "apns_response_duration_seconds",
            help: "Time from sending an APNs request to its response, for requests APNs answered.",
            labelNames: ["environment"], buckets: Self.responseDurationBuckets)
        eventToOutcome = try registry.histogram(
            p + "event_to_outcome_seconds", help: "Time from an event's occurrence to its outcome, by outcome status.",
            labelNames: ["status"], buckets: Self.eventToOutcomeBuckets)
        kafkaBrokersUp = try registry.gauge(
            p + "kafka_brokers_up", help: "Kafka brokers the consumer has a connection up to."
        ).labels()
        partitionsAssigned = try registry.gauge(
            p + "partitions_assigned", help: "Input topic partitions assigned to this consumer."
        ).labels()
        partitionsStranded = try registry.gauge(
            p + "kafka_partitions_stranded",
            help: "Assigned, unpaused partitions whose records wait in Kafka while the consumer fetches none of them."
        ).labels()

        apnsBreakerState = try registry.gauge(
            p + "apns_breaker_state",
            help: "Circuit breaker state of each APNs pool (environment/credential): 1 for its current state.",
            labelNames: ["pool", "state"])
        pushesHeld = try registry.gauge(
            p + "pushes_held", help: "Pushes waiting for an APNs pool that is down; they spend no attempts."
        ).labels()
        credentialsRefused = try registry.gauge(
            p + "apns_credentials_refused", help: "APNs pools whose credential APNs refuses now."
        ).labels()
        recordsParked = try registry.counter(
            p + "records_parked_total",
            help: "Records parked on the retry topic because APNs refused their pushes' credential, by reason.",
            labelNames: ["reason"])
        recordsReleasedUnsent = try registry.counter(
            p + "records_released_unsent_total",
            help: "Records whose waiting pushes were withdrawn unsent when their partition went (revoke, shutdown); "
                + "the partition's next owner sends them.",
            labelNames: ["cause"])
        recordsLeftRunning = try registry.counter(
            p + "records_left_running_total",
            help: "Records still running (pushes on their way to APNs, results not acknowledged by Kafka) when a "
                + "revoke's or the drain's time ran out; the partition's next owner sends them again.",
            labelNames: ["cause"])
        // At zero from the start, so that an alert on their increase sees the first one.
        for cause in RecordsHandedOver.Cause.allCases {
            _ = recordsReleasedUnsent.labels(cause.rawValue)
            _ = recordsLeftRunning.labels(cause.rawValue)
        }

        resultsUnacknowledged = try registry.gauge(
            p + "results_unacknowledged",
            help: "Result records handed to the Kafka producer and not acknowledged by Kafka yet."
        ).labels()
        kafkaTransactions = try registry.counter(
            p + "kafka_transactions_total",
            help: "Exactly-once mode: Kafka transactions by result (committed, aborted, fatal).",
            labelNames: ["result"])
        resultsHeld = try registry.gauge(
            p + "results_held", help: "Exactly-once mode: records whose results wait for their Kafka transaction."
        ).labels()
    }

    /// Counts one APNs request attempt with its labels folded into their bounded sets.
    public func countRequest(pushType: String, httpStatus: Int?, reason: String?) {
        apnsRequests.labels(Self.requestLabels(pushType: pushType, httpStatus: httpStatus, reason: reason)).increment()
    }

    /// The label values of `apns_requests_total` for one attempt, each folded into its bounded set.
    public static func requestLabels(pushType: String, httpStatus: Int?, reason: String?) -> [String] {
        [pushTypeLabel(pushType), statusLabel(httpStatus), reasonLabel(reason)]
    }
}

extension WorkerMetrics {
    /// The push types APNs defines; anything else is labelled `other`.
    public static let pushTypes: Set<String> = [
        "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]

    /// The reasons APNs documents, plus the client's own for attempts that got no response: the transport
    /// error codes (`HTTP2ClientError.Code`) and what `APNsClient` records for a request it could not send.
    public static let reasons: Set<String> = [
        "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
        "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType", "MissingDeviceToken",
        "MissingTopic", "PayloadEmpty", "TopicDisallowed", "BadCertificate", "BadCertificateEnvironment",
        "ExpiredProviderToken", "Forbidden", "InvalidProviderToken", "MissingProviderToken", "UnrelatedKeyIdInToken",
        "BadEnvironmentKeyIdInToken", "BadPath", "MethodNotAllowed", "ExpiredToken", "Unregistered",
        "PayloadTooLarge", "TooManyProviderTokenUpdates", "TooManyRequests", "InternalServerError",
        "ServiceUnavailable", "Shutdown",
        // No response: HTTP2ClientError.Code's names, then APNsClient's.
        "invalidConfiguration", "connectFailed", "connectTimeout", "tlsHandshakeFailed",
        "certificateVerificationFailed", "http2NotNegotiated", "connectionClosed", "unprocessed", "streamReset",
        "requestTimeout", "poolSaturated", "poolShutDown", "protocolError", "responseTooLarge",
        "proxyUnreachable", "proxyAuthenticationRequired", "proxyCredentialsRefused", "proxyForbidden", "proxyRefused",
        "invalidRequest", "credential", "cancelled", "error",
    ]

    /// `alert`, `voip`, ... or `other`.
    public static func pushTypeLabel(_ pushType: String) -> String {
        pushTypes.contains(pushType) ? pushType : "other"
    }

    /// The HTTP status as digits, `none` when no response arrived, `other` outside 100...599.
    public static func statusLabel(_ httpStatus: Int?) -> String {
        guard let httpStatus else { return "none" }
        return (100...599).contains(httpStatus) ? String(httpStatus) : "other"
    }

    /// A documented reason as is, `none` when there is none (a 200), `other` otherwise.
    public static func reasonLabel(_ reason: String?) -> String {
        guard let reason, !reason.isEmpty else { return "none" }
        return reasons.contains(reason) ? reason : "other"
    }
}
