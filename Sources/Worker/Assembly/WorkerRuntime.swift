// Assembles the worker from its configuration: credentials and APNs clients, the rules, Kafka in
// and out, the pipeline, metrics and readiness; and takes it down again in order on shutdown.
import Foundation
import APNs
import Kafka
public import PushRules

/// A running worker. Create it, `start()` it, and `shutdown(timeout:)` it on SIGTERM.
public final class WorkerRuntime: Sendable {
    public let configuration: WorkerConfiguration
    public let pipeline: Pipeline
    public let metrics: WorkerMetrics
    let source: KafkaEventSource
    let producer: KafkaProducer
    let transport: APNsPushTransport
    let group: EventLoopGroup
    let logger: Logger
    let credentials: [String: LoadedCredential]

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
        let metricsObserver = MetricsObserver(metrics: metrics, next: observer)
        let clients = try CredentialClients.clients(
            for: configuration, credentials: credentials, group: group,
            attemptObserver: { request, attempt in metricsObserver.attemptEnded(request, attempt) })
        transport = APNsPushTransport(
            clients: clients, policy: CredentialClients.retryPolicy(configuration.retry),
            observe: { push, result in metricsObserver.delivered(push, result) })

        let kafkaProperties = try Self.kafkaProperties(configuration.kafka)
        let client = KafkaConfiguration(
            bootstrapServers: configuration.kafka.brokers.joined(separator: ","), properties: kafkaProperties)
        var consumerConfiguration = KafkaConsumerConfiguration(client: client, groupID: configuration.kafka.group)
        if !configuration.kafka.groupInstanceID.isEmpty {
            consumerConfiguration.client.properties["group.instance.id"] = configuration.kafka.groupInstanceID
        }
        consumerConfiguration.rebalanceDeadline = .milliseconds(Int(configuration.pipeline.revokeTimeout * 1000) + 2000)
        // Stored offsets are committed every second: what a crash (or a refused revoke commit) makes
        // the next owner redo is at most a second of work beyond the records in flight.
        consumerConfiguration.autoCommitInterval = .seconds(1)
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
            configuration: consumerConfiguration, topics: [configuration.kafka.requestsTopic],
            eventHandler: eventHandler, report: { message in kafkaLogger.warning(message, [:], rateLimitKey: "offset store") })
        producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), eventHandler: eventHandler)

        var pipelineConfiguration = PipelineConfiguration()
        pipelineConfiguration.outcomesTopic = configuration.kafka.outcomesTopic
        pipelineConfiguration.invalidTokensTopic = configuration.kafka.invalidTokensTopic
        pipelineConfiguration.deadLetterTopic = configuration.kafka.deadLetterTopic
        pipelineConfiguration.maxRecordsInFlight = configuration.pipeline.maxInFlightRecords
        pipelineConfiguration.resumeBelow = configuration.pipeline.resumeBelow
        pipelineConfiguration.revokeTimeout = configuration.pipeline.revokeTimeout
        let loops = group
        // Each record runs on one of the loops (round-robin): its sends go out and its responses come
        // back on that thread, without a hand-off to and from the cooperative pool for every send.
        let recordExecutor: @Sendable () -> any TaskExecutor = { loops.taskExecutor() }
        let ruleMatches = metrics.ruleMatches
        let planner = RulesPlanner(
            store: rules, configuredApps: Set(configuration.apps.keys),
            onMatch: { ids in for id in ids { ruleMatches.labels(id).increment() } })
        pipeline = Pipeline(
            configuration: pipelineConfiguration, source: source, sink: KafkaResultSink(producer: producer),
            planner: planner, transport: transport, observer: metricsObserver,
            processingExecutor: recordExecutor)

        registerScrapeTimeMetrics()
    }

    /// The librdkafka properties: the configured ones plus those read from files (secrets).
    static func kafkaProperties(_ kafka: WorkerConfiguration.Kafka) throws -> [String: String] {
        var properties = kafka.properties
        var problems: [ConfigurationProblem] = []
        for (name, path) in kafka.propertyFiles {
            guard let data = FileManager.default.contents(atPath: path) else {
                problems.append(ConfigurationProblem(
                    path: "kafka.property_files." + name, message: "the file \(path) does not exist or cannot be read"))
                continue
            }
            var value = String(decoding: data, as: UTF8.self)
            while value.hasSuffix("\n") || value.hasSuffix("\r") { value.removeLast() }
            properties[name] = value
        }
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return properties
    }

    private func registerScrapeTimeMetrics() {
        let metrics = self.metrics
        let pipeline = self.pipeline
        let source = self.source
        let credentials = self.credentials
        let pools = Self.poolsByLabel(configuration, transport.clients).map { label, pool in
            (open: metrics.connectionsOpen.labels(label), pool: pool)
        }
        metrics.registry.onCollect {
            metrics.recordsInFlight.set(pipeline.recordsInFlight)
            for (partition, lag) in source.lags() {
                metrics.consumerLag.labels(partition.topic, String(partition.partition)).set(Int(lag))
            }
            for credential in credentials.values {
                if let age = credential.signer?.tokenAge { metrics.providerTokenAge.labels(credential.name).set(Int(age)) }
                if let identity = credential.identity {
                    metrics.certificateExpiry.labels(credential.name).set(identity.notAfter.timeIntervalSince1970)
                }
            }
            var requestsInFlight = 0
            var requestsQueued = 0
            for (open, pool) in pools {
                let statistics = pool.statistics
                open.set(statistics.readyConnections + statistics.drainingConnections)
                requestsInFlight += statistics.streamsInFlight
                requestsQueued += statistics.queuedRequests
            }
            metrics.requestsInFlight.set(requestsInFlight)
            metrics.requestsQueued.set(requestsQueued)
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
    public func start() async throws {
        // Results of the first records would otherwise wait about a second for librdkafka's lazy
        // topic lookup, with the in-flight cap full the whole time.
        let outputTopics = [
            configuration.kafka.outcomesTopic, configuration.kafka.invalidTokensTopic, configuration.kafka.deadLetterTopic,
        ]
        for problem in await producer.prepare(topics: outputTopics, timeout: .seconds(10)) {
            logger.warning("output topic not ready: \(problem)", [:])
        }
        try pipeline.start()
        logger.info("worker started", [
            "group": .string(configuration.kafka.group), "topic": .string(configuration.kafka.requestsTopic),
            "apps": .array(configuration.apps.keys.sorted().map(JSONValue.string)),
            "max_in_flight_records": .int(Int64(configuration.pipeline.maxInFlightRecords)),
        ])
    }

    /// Stops consuming, lets in-flight records finish within `timeout` seconds, commits what finished,
    /// and closes every connection. Returns the records abandoned (redelivered to the next owner).
    @discardableResult
    public func shutdown(timeout: Double) async -> Int {
        let abandoned = await pipeline.drain(timeout: timeout)
        await transport.shutdown(gracePeriod: .seconds(1))
        try? await producer.close(timeout: .seconds(5))
        await group.shutdown()
        logger.info("worker stopped", [
            "abandoned_records": .int(Int64(abandoned)),
            "records_finished": .int(Int64(pipeline.counters.recordsFinished)),
        ])
        return abandoned
    }
}
