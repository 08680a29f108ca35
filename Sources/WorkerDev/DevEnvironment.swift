// `apns-worker dev`: the whole system in one process with no outside services — librdkafka's mock
// cluster, the APNs simulator (some dead tokens, some 503s), the worker with the example rules, and
// a generator of sample events — printing outcomes as they are acknowledged by Kafka.

import APNs
import APNsSimulator
import Foundation
import JSON
import Kafka
import PushRules
import Synchronization
import Worker

public enum DevEnvironment {
    public struct Options: Sendable {
        /// Events to generate before stopping; ignored with `follow`. Default: 300.
        public var events = 300
        /// Keep generating until Ctrl-C.
        public var follow = false
        /// Events per second the generator produces; nil for as fast as the worker takes them.
        public var rate: Double? = 100
        /// Share of APNs requests the simulator answers 503 (retried). Default: 0.05.
        public var failureRate = 0.05
        /// Print one line per outcome. Default: true.
        public var printOutcomes = true
        /// Where /metrics, /healthz and /readyz listen. Default: 127.0.0.1:0 (a free port).
        public var metricsListen = "127.0.0.1:0"
        public init() {}
    }

    /// Runs the demo; returns the exit code (0 when every event got its outcome).
    public static func run(_ options: Options, print: @escaping @Sendable (String) -> Void) async -> Int32 {
        let writer = LogWriter(configuration: .init(level: .warning))
        defer { writer.close() }
        let logger = Logger(writer: writer, context: ["service": "apns-worker-dev"])
        do {
            let stack = try DevStack(
                failureRate: options.failureRate,
                latency: LatencyDistribution(fixedMilliseconds: 1, jitter: .exponential(meanMilliseconds: 3)),
                metricsListen: options.metricsListen, group: "apns-worker-dev")
            defer { stack.simulator.stop() }
            let (simulator, configuration) = (stack.simulator, stack.configuration)
            let (rules, credentials) = (stack.rules, stack.credentials)
            var generator = stack.generator

            print("apns-worker dev: mock Kafka at \(stack.bootstrapServers), APNs simulator at \(simulator.baseURL)")
            print(
                "  \(generator.unregisteredTokens.count) of \(generator.devices.count) sample devices are unregistered; "
                    + "\(Int(options.failureRate * 100))% of requests get 503 and are retried; 1 event in "
                    + "\(generator.malformedEvery) is malformed (dead-lettered)")
            let summary = DevSummary()
            let silent: @Sendable (String) -> Void = { _ in }
            let printer = OutcomePrinter(print: options.printOutcomes ? print : silent, summary: summary)
            let shutdown = ShutdownSignal()
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    client: KafkaConfiguration(bootstrapServers: stack.bootstrapServers)))
            let target = options.follow ? Int.max : options.events
            let started = Date()
            let generation = Task {
                var sequence = 0
                while sequence < target && !Task.isCancelled && !shutdown.isTriggered {
                    let (eventKey, value) = generator.event(
                        sequence: sequence, occurredAt: Date().timeIntervalSince1970)
                    try? await producer.send(
                        topic: stack.requestsTopic, key: eventKey, value: value, onDelivery: { _ in })
                    sequence += 1
                    if let rate = options.rate, rate > 0 {
                        try? await Task.sleep(for: .microseconds(Int(1_000_000 / rate)))
                    }
                }
                try? await producer.flush(timeout: .seconds(10))
                return sequence
            }
            let exitCode = await WorkerProcess.run(
                configuration: configuration, logger: logger, observer: printer, rulesStore: rules, shutdown: shutdown,
                preloadedCredentials: credentials,
                started: { runtime, metricsURL in
                    print("  worker running; metrics at \(metricsURL)/metrics")
                    Task {
                        while !shutdown.isTriggered {
                            if !options.follow, runtime.pipeline.counters.recordsFinished >= target {
                                shutdown.trigger(reason: "all \(target) events have outcomes")
                            }
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                })
            generation.cancel()
            let produced = await generation.value
            try? await producer.close(timeout: .seconds(2))
            let elapsed = Date().timeIntervalSince(started)
            print(summary.render(events: produced, seconds: elapsed, simulator: simulator.stats))
            // librdkafka's last reconnect attempts to the stopped cluster are noise, not news.
            writer.close()
            await stack.cluster?.stop()
            return exitCode
        } catch {
            print("apns-worker dev: \(error)")
            return 1
        }
    }
}

/// What `dev` and `bench pipeline` run against: a mock cluster with the worker's topics (or an outside
/// cluster, for `bench pipeline --kafka-brokers`), a simulator trusting a generated key (some tokens
/// unregistered), the example rules and a worker configuration.
final class DevStack: Sendable {
    static let app = "com.example.chat"
    /// The worker's topics (names without any prefix) and their partitions.
    static let topicPartitions = [
        "push.requests": 6, "push.outcomes": 6, "push.invalid-tokens": 3, "push.dlq": 1, "push.retry": 2,
    ]
    /// The mock cluster; nil when the stack runs against outside brokers.
    let cluster: MockKafkaCluster?
    let bootstrapServers: String
    /// Put before every topic name: empty on the mock cluster, unique per run on outside brokers, so that
    /// a run never reads what an earlier one left there.
    let topicPrefix: String
    let simulator: APNsSimulator
    let configuration: WorkerConfiguration
    let rules: RulesStore
    let credentials: [String: LoadedCredential]
    let generator: SampleEventGenerator

    init(
        failureRate: Double, latency: LatencyDistribution, handshakeMilliseconds: Double = 0, metricsListen: String,
        group: String, maxInFlight: Int? = nil, threads: Int? = nil, maxConnections: Int? = nil,
        unregisteredEvery: Int = 25,
        malformedEvery: Int = 50,
        keepsAcceptedNotifications: Bool = true, exactlyOnce: Bool = false, outsideBrokers: String? = nil,
        kafkaProperties: [String: String] = [:]
    ) throws {
        if let outsideBrokers {
            cluster = nil
            bootstrapServers = outsideBrokers
            topicPrefix = "bench-\(Int(Date().timeIntervalSince1970 * 1000))-\(getpid())."
        } else {
            let cluster = try MockKafkaCluster(brokers: 3)
            for (topic, partitions) in Self.topicPartitions.sorted(by: { $0.key < $1.key }) {
                try cluster.createTopic(topic, partitions: partitions)
            }
            self.cluster = cluster
            bootstrapServers = cluster.bootstrapServers
            topicPrefix = ""
        }
        generator = SampleEventGenerator(
            app: Self.app, unregisteredEvery: unregisteredEvery, malformedEvery: malformedEvery)
        let key = try ProviderTokenKey.generate(keyID: "DEVKEY0001", teamID: "DEVTEAM001")

        var simulatorConfiguration = SimulatorConfiguration()
        simulatorConfiguration.authentication = .providerToken(
            keys: [SimulatorProviderKey(keyID: key.keyID, publicKeyPEM: key.publicKeyPEM, teamID: key.teamID)])
        for token in generator.unregisteredTokens { simulatorConfiguration.devices.unregistered[token] = .some(nil) }
        simulatorConfiguration.faults.failureRate = failureRate
        simulatorConfiguration.faults.failure = .serviceUnavailable(retryAfterSeconds: nil)
        simulatorConfiguration.faults.latency = latency
        simulatorConfiguration.faults.handshakeMilliseconds = handshakeMilliseconds
        // The benchmark reads only the simulator's counters; copying every accepted push would be its cost.
        if !keepsAcceptedNotifications { simulatorConfiguration.acceptedCapacity = 0 }
        simulator = try APNsSimulator(simulatorConfiguration)
        _ = try simulator.start()

        let brokers: [JSONValue] = bootstrapServers.split(separator: ",").map { .string(String($0)) }
        var document = JSONObject()
        // librdkafka's mock broker behaves as if it held an empty fetch for the whole fetch.wait.max.ms
        // (500 ms by default) even when records arrive meanwhile; a real broker answers as soon as there
        // is data, so the wait would dominate the live latency `dev` and `bench pipeline` show, and delay
        // a partition that resumes fetching after a pause. The dev stack uses 10 ms, so its figures are
        // about the worker, not the mock; the empty fetches it costs are negligible (figures:
        // docs/performance.md).
        var properties: JSONObject = ["reconnect.backoff.max.ms": "1000", "fetch.wait.max.ms": "10"]
        for (name, value) in kafkaProperties { properties[name] = .string(value) }
        let prefix = topicPrefix
        document["kafka"] = [
            "brokers": .array(brokers), "group": .string(prefix + group), "properties": .object(properties),
            "exactly_once": .bool(exactlyOnce),
            "topics": [
                "requests": .string(prefix + "push.requests"), "outcomes": .string(prefix + "push.outcomes"),
                "invalid_tokens": .string(prefix + "push.invalid-tokens"), "dlq": .string(prefix + "push.dlq"),
                "retry": .string(prefix + "push.retry"),
            ],
        ]
        let credential: JSONValue = [
            "type": "token", "key_file": "(generated in memory)", "key_id": .string(key.keyID),
            "team_id": .string(key.teamID),
        ]
        document["credentials"] = ["dev-key": credential]
        var apps = JSONObject()
        apps[Self.app] = ["credential": "dev-key"]
        document["apps"] = .object(apps)
        let endpoints: JSONValue = ["production": .string(simulator.baseURL), "sandbox": .string(simulator.baseURL)]
        var apns: JSONObject = ["endpoints": endpoints, "ca_file": .string(simulator.caFilePath), "connections": 2]
        if let maxConnections { apns["max_connections"] = .int(Int64(maxConnections)) }
        document["apns"] = .object(apns)
        var pipeline = JSONObject()
        if let maxInFlight { pipeline["max_in_flight_records"] = .int(Int64(maxInFlight)) }
        if let threads { pipeline["threads"] = .int(Int64(threads)) }
        if !pipeline.isEmpty { document["pipeline"] = .object(pipeline) }
        document["retry"] = ["max_attempts": 5, "base_backoff": "50ms", "max_backoff": "1s", "max_total_time": "30s"]
        document["shutdown"] = ["drain_timeout": "10s"]
        document["metrics"] = ["listen": .string(metricsListen)]
        configuration = try WorkerConfiguration(decoding: .object(document))
        rules = RulesStore(
            path: "examples/rules.yaml (embedded)",
            initial: try RuleSet(text: embeddedExampleRules, file: "examples/rules.yaml (embedded)"))
        credentials = ["dev-key": LoadedCredential(name: "dev-key", signer: try ProviderTokenSigner(key: key))]
    }

    /// The topic the worker reads events from.
    var requestsTopic: String { configuration.kafka.requestsTopic }

    /// Creates the run's topics on the outside brokers (the mock cluster has them from the start).
    func createTopicsIfOutside(with producer: KafkaProducer) async throws {
        guard cluster == nil else { return }
        let topics = Self.topicPartitions.sorted { $0.key < $1.key }.map {
            (name: topicPrefix + $0.key, partitions: $0.value, replicationFactor: 1)
        }
        try await producer.createTopics(topics, timeout: .seconds(30))
    }
}

/// Counts for the closing summary.
final class DevSummary: Sendable {
    struct Counts {
        var byStatus: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        var deadLetters = 0
        var retried = 0
    }
    let counts = Mutex(Counts())

    func render(events: Int, seconds: Double, simulator: SimulatorStats) -> String {
        let counts = self.counts.withLock { $0 }
        let outcomes = counts.byStatus.values.reduce(0, +)
        var lines = [
            "",
            "summary: \(events) events in \(String(format: "%.1f", seconds)) s → \(outcomes) outcomes, "
                + "\(counts.deadLetters) dead letters",
        ]
        for status in ["delivered", "rejected", "failed", "skipped"] {
            lines.append(
                "  \(status.padding(toLength: 10, withPad: " ", startingAt: 0)) \(counts.byStatus[status, default: 0])")
        }
        let reasons = counts.byReason.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }
        if !reasons.isEmpty { lines.append("  reasons: " + reasons.joined(separator: ", ")) }
        lines.append(
            "  \(counts.retried) outcomes needed retries; the simulator saw \(simulator.requests) requests "
                + "on \(simulator.connectionsAccepted) connections")
        return lines.joined(separator: "\n")
    }
}

/// Prints each outcome on one line as Kafka acknowledges it.
struct OutcomePrinter: PipelineObserver {
    let print: @Sendable (String) -> Void
    let summary: DevSummary

    func outcomesPublished(_ outcomes: PublishedOutcomes, eventTime: Double?) {
        for outcome in outcomes.records ?? [] { printLine(outcome) }
    }

    /// Each outcome is printed (and its status and reason counted for the summary).
    var keepsOutcomeRecords: Bool { true }

    private func printLine(_ outcome: OutcomeRecord) {
        summary.counts.withLock { counts in
            counts.byStatus[outcome.status.rawValue, default: 0] += 1
            if let reason = outcome.reason { counts.byReason[reason, default: 0] += 1 }
            if outcome.attempts.count > 1 { counts.retried += 1 }
        }
        let token = String(outcome.deviceToken.prefix(8)) + "…"
        var line =
            outcome.status.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)
            + outcome.eventID.padding(toLength: 10, withPad: " ", startingAt: 0) + " " + token
            + " " + outcome.environment.padding(toLength: 10, withPad: " ", startingAt: 0)
            + " rule=" + (outcome.ruleID ?? "-")
        if let status = outcome.httpStatus { line += " http=\(status)" }
        if let reason = outcome.reason { line += " reason=\(reason)" }
        if outcome.attempts.count > 1 { line += " attempts=\(outcome.attempts.count)" }
        print(line)
    }

    func deadLettered(_ record: SourceRecord, errorClass: String, message: String) {
        summary.counts.withLock { $0.deadLetters += 1 }
        print(
            "dead-letter offset \(record.offset) of \(record.topic)[\(record.partition)]: \(errorClass): \(message.prefix(80))"
        )
    }
}
