// Assembles the worker from its configuration: credentials and APNs clients, the rules, Kafka in
// and out, the pipeline, metrics and readiness; and takes it down again in order on shutdown.

import APNs
import Foundation
import HTTP2
import JSON
import Kafka
public import PushRules
import Synchronization

/// A running worker. Create it, `start()` it, and `shutdown(timeout:)` it on SIGTERM.
public final class WorkerRuntime: Sendable {
    public let configuration: WorkerConfiguration
    public let pipeline: Pipeline
    public let metrics: WorkerMetrics
    let source: KafkaEventSource
    let producer: KafkaProducer
    let sink: KafkaResultSink
    /// Exactly-once mode's transactional sink (`kafka.exactly_once`), else nil.
    let transactions: KafkaTransactionalSink?
    let transport: APNsPushTransport
    let group: EventLoopGroup
    let logger: Logger
    let credentials: [String: LoadedCredential]
    /// Where a shutdown is, for the watchdog that ends one that overruns.
    public let shutdownProgress: ShutdownProgress

    /// Builds every part and checks every credential; connects to nothing yet except Kafka clients
    /// being created.
    ///
    /// - Parameters:
    ///   - observer: also told about outcomes (the `dev` command prints them).
    ///   - preloadedCredentials: credentials made in memory instead of loaded from files (`dev`).
    public init(
        configuration: WorkerConfiguration, rules: RulesStore, metrics: WorkerMetrics, readiness: Readiness,
        logger: Logger, observer: (any PipelineObserver)? = nil, preloadedCredentials: [String: LoadedCredential]? = nil
    ) throws {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        credentials = try preloadedCredentials ?? CredentialClients.load(configuration)
        readiness.setReady(Readiness.Condition.credentials)
        // The loops run the connections and, as task executors, the records that send on them.
        group = EventLoopGroup(threadCount: configuration.pipeline.effectiveThreads)
        let poolHealth = APNsPoolHealth(logger: logger, readiness: readiness)
        let credentialHealth = CredentialHealth(logger: logger, readiness: readiness)
        let metricsObserver = MetricsObserver(
            metrics: metrics,
            next: HandOverLog(
                revokeLogger: logger.with(["component": "kafka"]),
                shutdownLogger: logger.with(["component": "shutdown"]),
                drainTimeout: configuration.drainTimeout, next: observer))
        let clients = try CredentialClients.clients(
            for: configuration, credentials: credentials, group: group,
            attemptObserver: { request, attempt in metricsObserver.attemptEnded(request, attempt) },
            poolHealth: poolHealth, credentialHealth: credentialHealth)
        CredentialClients.logProxies(clients, logger: logger)
        transport = APNsPushTransport(
            clients: clients, policy: CredentialClients.retryPolicy(configuration.retry),
            observe: { result in metricsObserver.delivered(result) })

        let kafkaProperties = try Self.kafkaProperties(configuration.kafka)
        let client = KafkaConfiguration(
            bootstrapServers: configuration.kafka.brokers.joined(separator: ","), properties: kafkaProperties)
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.group)
        if !configuration.kafka.groupInstanceID.isEmpty {
            consumerConfiguration.client.properties["group.instance.id"] = configuration.kafka.groupInstanceID
        }
        consumerConfiguration.rebalanceDeadline = .milliseconds(Int(configuration.pipeline.revokeTimeout * 1000) + 2000)
        // The worker commits stored offsets itself, every kafka.commit_interval and whenever they advanced by
        // kafka.commit_after_records (5 % of the in-flight cap by default): a restarted worker works through
        // the backlog its outage left at several times the input rate, and librdkafka's 1 s auto-commit (a
        // backstop here) then left ~2,000 finished records uncommitted a second after the restart.
        consumerConfiguration.autoCommitInterval = .seconds(1)
        if configuration.kafka.exactlyOnce {
            Self.commitOnlyInTransactions(&consumerConfiguration)
        } else if configuration.kafka.commitInterval > 0 {
            consumerConfiguration.commitInterval = .milliseconds(Int64(configuration.kafka.commitInterval * 1000))
            consumerConfiguration.commitAfterRecords = configuration.effectiveCommitAfterRecords
        }
        consumerConfiguration.strandedPartitionThreshold = Self.strandedPartitionThreshold(configuration.kafka)
        // The consumer's hand-off holds records the pipeline has not taken yet; keep it small beside the
        // cap so that records held in memory stay within cap + cap/4.
        consumerConfiguration.bufferCapacity = max(16, min(256, configuration.pipeline.maxInFlightRecords / 4))
        // The pipeline pauses by holding records back (DeliveryGate), so librdkafka's prefetch queue is
        // what waits during a short pause: 8 MB instead of librdkafka's 64 MB default keeps it modest
        // (a pause longer than the consumer's stall timeout pauses fetching and frees it). Configurable.
        if consumerConfiguration.client.properties["queued.max.messages.kbytes"] == nil {
            consumerConfiguration.client.properties["queued.max.messages.kbytes"] = "8192"
        }
        let kafkaLogger = logger.with(["component": "kafka"])
        let progress = ShutdownProgress()
        shutdownProgress = progress
        let statusHandler: KafkaConsumerStatusHandler = { change in
            Self.report(change, readiness: readiness, metrics: metrics, logger: kafkaLogger, progress: progress)
        }
        let rebalanceObserver: @Sendable (KafkaRebalanceEvent) -> Void = { event in
            switch event {
            case .assigned(let partitions):
                kafkaLogger.info("kafka partitions assigned", ["partitions": Self.list(partitions)])
            case .revoked(let revocation):
                kafkaLogger.info(
                    revocation.isLost ? "kafka partitions lost" : "kafka partitions revoked",
                    [
                        "partitions": Self.list(revocation.partitions)
                    ])
            }
        }
        let eventHandler: KafkaEventHandler = { event in
            switch event {
            case .log(let line) where line.level <= 4:
                kafkaLogger.warning(line.message, ["facility": .string(line.facility)], rateLimitKey: line.facility)
            case .error(let error):
                kafkaLogger.warning("\(error)", [:], rateLimitKey: "kafka error \(error.code)")
            case .fatal(let error):
                kafkaLogger.critical("\(error)", [:])
            default:
                break
            }
        }
        source = try KafkaEventSource(
            configuration: consumerConfiguration,
            topics: [configuration.kafka.requestsTopic, configuration.kafka.retryTopic],
            eventHandler: eventHandler, statusHandler: statusHandler, rebalanceObserver: rebalanceObserver,
            report: { message in kafkaLogger.warning(message, [:], rateLimitKey: "offset store") })
        // The producer waits through broker outages (no delivery timeout unless `kafka.properties` sets
        // one; a full queue waits for room): the records wait, their offsets hold, and the log, /readyz
        // and the unacknowledged gauge say so.
        readiness.setReady(Readiness.Condition.kafkaProducer)
        readiness.setReady(Readiness.Condition.kafkaFetching)
        // The sink needs the producer; the status handler reads the sink's count (which includes records
        // waiting to be sent again) once the sink exists.
        let sinkSlot = ResultSinkSlot()
        producer = try KafkaProducer(
            configuration: Self.producerConfiguration(client: client, configuration.kafka), eventHandler: eventHandler,
            statusHandler: { status in
                Self.report(
                    status, unacknowledged: sinkSlot.sink?.unacknowledged ?? status.unacknowledged,
                    readiness: readiness, logger: kafkaLogger)
            })

        var pipelineConfiguration = PipelineConfiguration()
        pipelineConfiguration.outcomesTopic = configuration.kafka.outcomesTopic
        pipelineConfiguration.invalidTokensTopic = configuration.kafka.invalidTokensTopic
        pipelineConfiguration.deadLetterTopic = configuration.kafka.deadLetterTopic
        pipelineConfiguration.retryTopic = configuration.kafka.retryTopic
        pipelineConfiguration.parkDelay = configuration.retry.parkDelay
        pipelineConfiguration.maxRecordsInFlight = configuration.pipeline.maxInFlightRecords
        pipelineConfiguration.resumeBelow = configuration.pipeline.resumeBelow
        pipelineConfiguration.revokeTimeout = configuration.pipeline.revokeTimeout
        let loops = group
        // Each record runs on one of the loops (round-robin): its sends go out and its responses come
        // back on that thread, without a hand-off to and from the cooperative pool for every send.
        let recordExecutor: @Sendable () -> any TaskExecutor = { loops.taskExecutor() }
        // Each rule's series looked up by its id alone: `labels(id)` made an array of label values and
        // hashed it under the family's lock, once per event on every loop.
        let ruleMatches = SeriesCache<String, Counter>(metrics.ruleMatches) { [$0] }
        let planner = RulesPlanner(
            store: rules, configuredApps: Set(configuration.apps.keys),
            onMatch: { ids in for id in ids { ruleMatches[id].increment() } })
        let sink = KafkaResultSink(
            producer: producer, report: { kafkaLogger.error($0, [:], rateLimitKey: "record too large") })
        self.sink = sink
        sinkSlot.sink = sink
        metrics.registry.onCollect { metrics.resultsUnacknowledged.set(sink.unacknowledged) }
        let transactions = Self.transactionalSink(
            configuration, producer: producer, consumer: source.consumer, metrics: metrics, readiness: readiness,
            logger: kafkaLogger)
        self.transactions = transactions
        pipeline = Pipeline(
            configuration: pipelineConfiguration, source: source, sink: sink,
            planner: planner, transport: transport, observer: metricsObserver,
            processingExecutor: recordExecutor, recordRunner: { loops.execute($0) }, transactions: transactions)

        registerScrapeTimeMetrics()
        registerPoolHealthMetrics(clients, credentialHealth: credentialHealth)
    }

    /// The breaker gauges, read from every pool's breaker at each scrape.
    private func registerPoolHealthMetrics(
        _ clients: [String: [APNsEnvironment: APNsClient]], credentialHealth: CredentialHealth
    ) {
        var breakers: [String: CircuitBreaker] = [:]
        for (bundle, byEnvironment) in clients {
            guard let app = configuration.apps[bundle] else { continue }
            for (environment, client) in byEnvironment {
                let pool = APNsPoolHealth.poolName(
                    environment: environment, credential: app.credentialName(for: environment))
                breakers[pool] = client.breaker(for: environment)
            }
        }
        let pools = breakers.sorted { $0.key < $1.key }.map { (pool: $0.key, breaker: $0.value) }
        let metrics = self.metrics
        metrics.registry.onCollect {
            APNsPoolHealth.collect(pools, into: metrics)
            metrics.credentialsRefused.set(credentialHealth.refusedPools)
        }
    }

    private func registerScrapeTimeMetrics() {
        let metrics = self.metrics
        let pipeline = self.pipeline
        let source = self.source
        let credentials = self.credentials
        let transport = self.transport
        let pools = Self.poolsByLabel(configuration, transport.clients).map { label, pool in
            (
                open: metrics.connectionsOpen.labels(label), connecting: metrics.connectionsConnecting.labels(label),
                pool: pool
            )
        }
        metrics.registry.onCollect {
            metrics.recordsInFlight.set(pipeline.recordsInFlight)
            metrics.recordsInFlightLimit.set(pipeline.recordsInFlightLimit)
            for (partition, lag) in source.lags() {
                metrics.consumerLag.labels(partition.topic, String(partition.partition)).set(Int(lag))
            }
            for credential in credentials.values {
                if let age = credential.signer?.tokenAge {
                    metrics.providerTokenAge.labels(credential.name).set(Int(age))
                }
                if let identity = credential.identity {
                    metrics.certificateExpiry.labels(credential.name).set(identity.notAfter.timeIntervalSince1970)
                }
            }
            var requestsInFlight = 0
            var requestsQueued = 0
            for (open, connecting, pool) in pools {
                let statistics = pool.statistics
                open.set(statistics.readyConnections + statistics.drainingConnections)
                connecting.set(statistics.connectingConnections)
                requestsInFlight += statistics.streamsInFlight
                requestsQueued += statistics.queuedRequests
            }
            metrics.requestsInFlight.set(requestsInFlight)
            metrics.requestsQueued.set(requestsQueued)
            metrics.devicesThrottled.set(transport.throttledDevices)
        }
    }

    /// Every configured app's pools, once each, by the metrics' pool label `environment/credential`
    /// (apps that share a credential share its pools).
    static func poolsByLabel(
        _ configuration: WorkerConfiguration, _ clients: [String: [APNsEnvironment: APNsClient]]
    ) -> [(label: String, pool: ConnectionPool)] {
        var pools: [String: ConnectionPool] = [:]
        for (bundle, app) in configuration.apps {
            for environment in APNsEnvironment.allCases {
                guard let client = clients[bundle]?[environment] else { continue }
                let label = environment.rawValue + "/" + app.credentialName(for: environment)
                pools[label] = client.pool(for: environment)
            }
        }
        return pools.sorted { $0.key < $1.key }.map { (label: $0.key, pool: $0.value) }
    }

    /// Looks up the output topics, then joins the consumer group and starts processing.
    /// - Throws: `CancellationError` when the task is cancelled first (a shutdown during start-up): it
    ///   does not wait for a topic lookup that the brokers do not answer.
    public func start() async throws {
        // Results of the first records would otherwise wait about a second for librdkafka's lazy
        // topic lookup, with the in-flight cap full the whole time.
        let outputTopics = [
            configuration.kafka.outcomesTopic, configuration.kafka.invalidTokensTopic,
            configuration.kafka.deadLetterTopic,
            configuration.kafka.retryTopic,
        ]
        let producer = self.producer
        let problems = await unlessCancelled { await producer.prepare(topics: outputTopics, timeout: .seconds(10)) }
        try Task.checkCancellation()
        for problem in problems ?? [] {
            logger.warning("output topic not ready: \(problem)", [:])
        }
        try await startTransactions()
        try pipeline.start()
        logger.info(
            "worker started",
            [
                "group": .string(configuration.kafka.group), "topic": .string(configuration.kafka.requestsTopic),
                "apps": .array(configuration.apps.keys.sorted().map(JSONValue.string)),
                "max_in_flight_records": .int(Int64(configuration.pipeline.maxInFlightRecords)),
            ])
    }

    /// Stops consuming, lets in-flight records finish within `timeout` seconds, commits what finished,
    /// and closes every connection. Returns the records abandoned (redelivered to the next owner).
    @discardableResult
    public func shutdown(timeout: Double) async -> Int {
        await shutdown(deadline: ShutdownDeadline(drainTimeout: timeout)).recordsLeft
    }

    /// Shuts down within `deadline`: stops consuming, lets in-flight records (and a revoke under way)
    /// finish until its drain ends, commits what finished and leaves the group, then closes the
    /// producer and the APNs connections; each step ends by its part of the deadline. Logs what was
    /// left and every problem; the report says whether the shutdown was clean.
    public func shutdown(deadline: ShutdownDeadline) async -> ShutdownReport {
        var report = ShutdownReport()
        // A publish failure from before the shutdown means results are missing: the exit says so.
        report.publishFailure = pipeline.fatalError
        shutdownProgress.enter("draining in-flight records")
        source.prepareShutdown(deadline)
        let shutdownLogger = logger.with(["component": "shutdown"])
        let progress = shutdownProgress
        report.recordsLeft = await pipeline.drain(
            timeout: ShutdownDeadline.seconds(until: deadline.drainEnds),
            // What the drain left (released unsent, still running) is logged by HandOverLog, the observer.
            waitOver: { progress.enter("committing what finished and leaving the consumer group") })
        // Publish failures from here on are those of abandoned records, whose producer is closing.
        report.publishFailure = report.publishFailure ?? pipeline.fatalError
        if let outcome = source.closeOutcome {
            if let problem = outcome.commitProblem {
                shutdownLogger.warning(
                    "the final commit did not succeed; what finished since the last "
                        + "auto-commit is processed again by the group: \(problem)", [:])
            }
            if let problem = outcome.closeProblem {
                report.problems.append(
                    outcome.closeAbandoned
                        ? "the Kafka consumer's close was abandoned at its deadline (the group was not left "
                            + "cleanly; it rebalances after the session timeout): \(problem)"
                        : "leaving the consumer group failed: \(problem)")
            }
        }
        // Results that records finish from now on come too late to be committed. The producer closes
        // before the APNs connections, so that no abandoned record publishes an outcome (`failed`, as
        // the connections close under its pushes) for work that the group's next owner does again.
        shutdownProgress.enter("closing the producer")
        // What is held now stays uncommitted: the group does those records again.
        transactions?.stop()
        let producer = self.producer
        let unacknowledged = sink.unacknowledged
        let producerStatus = producer.status
        if unacknowledged > 0 {
            shutdownLogger.warning(
                "results unacknowledged by Kafka at shutdown: their input records stay "
                    + "uncommitted and the group's next owner processes them again",
                [
                    "results_unacknowledged": .int(Int64(unacknowledged)),
                    "producer": .string(producerStatus.description),
                ])
        }
        // While the brokers are away a flush cannot succeed: close at once, so that purging what is
        // left (every delivery callback runs once) has the rest of the margin.
        let producerTime =
            producerStatus.isWaitingForBrokers
            ? 0 : max(0, ShutdownDeadline.seconds(until: deadline.exitBy) - 1.5)
        let producerClosed = await waitAtMost(until: deadline.exitBy.advanced(by: .milliseconds(-500))) {
            try? await producer.close(timeout: .milliseconds(Int(producerTime * 1000)))
            return true
        }
        if producerClosed == nil { report.problems.append("the Kafka producer did not close in time") }
        shutdownProgress.enter("closing the APNs connections")
        let transport = self.transport
        let group = self.group
        let closed = await waitAtMost(until: deadline.exitBy.advanced(by: .milliseconds(-250))) {
            await transport.shutdown(gracePeriod: .milliseconds(250))
            await group.shutdown()
            return true
        }
        if closed == nil { report.problems.append("the APNs connections did not close in time") }
        shutdownProgress.enter("stopped")
        logger.info(
            "worker stopped",
            [
                "abandoned_records": .int(Int64(report.recordsLeft)),
                "records_finished": .int(Int64(pipeline.counters.recordsFinished)),
                "shutdown_seconds": .double(deadline.secondsElapsed),
            ])
        return report
    }

    static func list(_ partitions: [KafkaTopicPartition]) -> JSONValue {
        .array(partitions.sorted().map { .string("\($0.topic)[\($0.partition)]") })
    }
}

/// How a shutdown went: what it left, and what kept it from being clean.
public struct ShutdownReport: Sendable {
    /// Records not finished by the end of the drain: uncommitted, processed again by the group.
    public var recordsLeft = 0
    /// Results that could not be published (the pipeline's fatal error), if any.
    public var publishFailure: String?
    /// Steps that failed or were abandoned at their deadline, for the log.
    public var problems: [String] = []

    /// Whether the shutdown did what it promises: what finished is published and committed, the group
    /// was left, and the rest is left uncommitted for the next owner.
    public var isClean: Bool { publishFailure == nil && problems.isEmpty }
}

/// The result sink, for the producer's status handler that exists before it.
final class ResultSinkSlot: Sendable {
    private let slot = Mutex<KafkaResultSink?>(nil)
    var sink: KafkaResultSink? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}

extension Readiness.Condition {
    /// Results handed to the Kafka producer are acknowledged: none has waited past the producer's
    /// threshold with nothing acknowledged meanwhile (the brokers are away for the producer).
    public static let kafkaProducer = "kafka.producer"
    /// No assigned partition is stranded: each unpaused one moves when the brokers hold records for it
    /// (`KafkaConsumerStatus.strandedPartitions`).
    public static let kafkaFetching = "kafka.fetching"
}
