// The worker as a process: observability port, rules with reload, the runtime, and the signals that
// drive it (SIGTERM/SIGINT drain within the shutdown deadline and exit; SIGHUP reloads the rules).

import Foundation
import Platform
public import PushRules

#if canImport(Glibc)
import Glibc
#endif

public enum WorkerProcess {
    /// How long partitions may stay stranded (see `KafkaConsumerStatus.strandedPartitions`) before /healthz
    /// fails and Kubernetes restarts the pod; nil when the watch is off (`kafka.stranded_partition_after`
    /// `0s`). The watch restarts a stranded partition's fetching once per `threshold`: ten restarts that
    /// did not move it mean no restart will (10 minutes at the default `60s`). At least a minute, so that a
    /// short threshold (tests use one second) never restarts a pod over a fetch that resumes in seconds.
    static func strandedPartitionAllowance(threshold: Duration?) -> Duration? {
        guard let threshold else { return nil }
        return max(threshold * 10, .seconds(60))
    }

    /// Runs until SIGTERM/SIGINT (or `shutdown` is triggered); returns the process exit code: 0 after
    /// an orderly shutdown, 1 with a log line saying why otherwise. The shutdown takes at most
    /// `shutdown.drain_timeout` plus `ShutdownDeadline.margin` from the signal, also during start-up;
    /// a watchdog ends the process (code 1, logged) if a step overruns.
    ///
    /// - Parameters:
    ///   - checkOnly: load and check everything (rules, credentials, Kafka settings), then return.
    ///   - rulesText: rules to use instead of `configuration.rulesFile` (the `dev` command's embedded ones).
    ///   - shutdown: an outside trigger besides signals (the `dev` command stops after N events).
    ///   - started: called once the worker runs, with it and the base URL of its metrics and health port.
    ///   - configurationProblems: given the problems when the rules, a credential or a Kafka property stop
    ///     the start (then nothing is logged about them); without it they are logged.
    public static func run(
        configuration: WorkerConfiguration, logger: Logger, checkOnly: Bool = false,
        observer: (any PipelineObserver)? = nil, rulesStore: RulesStore? = nil,
        shutdown: ShutdownSignal = ShutdownSignal(),
        preloadedCredentials: [String: LoadedCredential]? = nil,
        started: (@Sendable (WorkerRuntime, _ metricsURL: String) -> Void)? = nil,
        configurationProblems: (@Sendable (ConfigurationError) -> Void)? = nil
    ) async -> Int32 {
        // First of all, so that a signal during start-up starts the bounded shutdown instead of ending
        // the process by its default action.
        let stopSignals = SignalWatcher(signals: [SIGTERM, SIGINT]) { number in
            shutdown.trigger(reason: number == SIGTERM ? "SIGTERM" : "SIGINT")
        }
        defer { stopSignals.cancel() }
        let metrics: WorkerMetrics
        do {
            metrics = try WorkerMetrics()
        } catch {
            logger.critical("metrics could not be registered: \(error)")
            return 1
        }
        let readiness = Readiness(conditions: Readiness.Condition.all)
        readiness.setReady(Readiness.Condition.config)
        let liveness = Liveness()

        let rules: RulesStore
        do throws(RulesLoadError) {
            if let rulesStore { rules = rulesStore } else { rules = try RulesStore(path: configuration.rulesFile) }
        } catch {
            if let configurationProblems {
                configurationProblems(ConfigurationError(rules: error))
                return 1
            }
            logger.critical(
                "the rules file has problems; the worker does not start",
                [
                    "problems": .array(error.problems.map { .string("\($0)") })
                ])
            return 1
        }
        logger.info("rules loaded", ["summary": .string(rules.current.summary)])

        let runtime: WorkerRuntime
        do {
            runtime = try WorkerRuntime(
                configuration: configuration, rules: rules, metrics: metrics, readiness: readiness, logger: logger,
                observer: observer, preloadedCredentials: preloadedCredentials)
        } catch {
            if let configurationProblems,
                let problems = ConfigurationError(startupFailure: error, kafka: configuration.kafka)
            {
                configurationProblems(problems)
                return 1
            }
            logger.critical("the worker cannot start: \(error)")
            return 1
        }
        if checkOnly {
            let topicProblems = CertificateTopicCheck.problems(
                configuration: configuration, credentials: runtime.credentials, pushTypes: rules.current.pushTypes)
            if !topicProblems.isEmpty {
                if let configurationProblems {
                    configurationProblems(ConfigurationError(problems: topicProblems))
                    return 1
                }
                logger.critical(
                    "an app's certificate does not list the topics its pushes need",
                    ["problems": .array(topicProblems.map { .string($0.description) })])
                return 1
            }
            // Said plainly, so that a passing check is not read as "this will run": nothing here
            // asked a broker or APNs anything.
            logger.info(
                "configuration, rules and credentials are valid",
                [
                    "not_checked": [
                        "that the Kafka brokers are reachable and the topics exist",
                        "that APNs accepts the credentials (a revoked key or certificate shows only when sending)",
                    ]
                ])
            return 0
        }

        let server: ObservabilityServer
        do {
            server = try ObservabilityServer(
                listen: ListenAddress(parsing: configuration.metricsListen), metrics: metrics.registry,
                liveness: liveness, readiness: readiness)
        } catch {
            logger.critical("the metrics port cannot be opened: \(error)")
            return 1
        }
        defer { server.stop() }
        // The port actually bound: with port 0 in the configuration it is known only now.
        let host = server.address.host.contains(":") ? "[\(server.address.host)]" : server.address.host
        let metricsURL = "http://\(host.isEmpty ? "0.0.0.0" : host):\(server.port)"
        logger.info("serving /metrics, /healthz and /readyz", ["url": .string(metricsURL)])

        let reloads = metrics.rulesReloads
        let reloadLogger = logger.with(["component": "rules"])
        let report: @Sendable (RulesReloadResult) -> Void = { result in
            switch result {
            case .replaced(let rules):
                reloads.labels("success").increment()
                reloadLogger.notice("rules reloaded", ["summary": .string(rules.summary)])
            case .rejected(let error):
                reloads.labels("failure").increment()
                reloadLogger.error(
                    "the changed rules file has problems; keeping the rules in use",
                    [
                        "problems": .array(error.problems.map { .string("\($0)") })
                    ], rateLimitKey: "rules rejected")
            case .unchanged:
                break
            }
        }
        let watcher = rulesStore == nil ? RulesFileWatcher(store: rules, interval: .seconds(5), onReload: report) : nil
        watcher?.start()
        defer { watcher?.stop() }

        let reloadSignal = SignalWatcher(signals: [SIGHUP]) { _ in
            DispatchQueue.global().async { report(rules.reload()) }
        }
        defer { reloadSignal.cancel() }

        // A shutdown during start-up does not wait for it (a topic lookup the brokers do not answer).
        let starting = Task { try await runtime.start() }
        shutdown.whenTriggered { _ in starting.cancel() }
        do {
            try await starting.value
            // kafka.brokers and kafka.group follow the consumer's status from here on.
            readiness.setReady(Readiness.Condition.apns)
            started?(runtime, metricsURL)
        } catch is CancellationError {
            logger.info("shutdown requested during start-up", [:])
        } catch {
            logger.critical("the worker cannot join its consumer group: \(error)")
            return 1
        }

        // The pipeline's own loop has no thread to watch; this heartbeat proves the process turns.
        let heartbeat = liveness.register("pipeline", allowance: .seconds(30))
        // Beats while no partition is stranded (librdkafka stopped fetching it and the consumer's restart did
        // not move it): one that stays so fails /healthz, and the restart moves its partitions to a member
        // that fetches them.
        let fetching = Self.strandedPartitionAllowance(
            threshold: WorkerRuntime.strandedPartitionThreshold(configuration.kafka)
        ).map { liveness.register("kafka.fetching", allowance: $0) }
        let source = runtime.source
        let beating = Task {
            while !Task.isCancelled {
                heartbeat.beat()
                if source.status.strandedPartitions.isEmpty { fetching?.beat() }
                if let fatal = runtime.pipeline.fatalError {
                    logger.critical(
                        "results could not be published; stopping without committing past them",
                        [
                            "error": .string(fatal)
                        ])
                    shutdown.trigger(reason: "publish failure")
                    break
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        let reason = await shutdown.wait()
        let deadline = ShutdownDeadline(
            drainTimeout: configuration.drainTimeout, startingAt: shutdown.triggeredAt ?? .now)
        let progress = runtime.shutdownProgress
        let watchdog = ShutdownWatchdog(deadline: deadline.exitBy, exitCode: 1) {
            logger.critical(
                "exiting with code 1: the shutdown did not finish within the drain timeout and its "
                    + "margin; what was not committed is processed again by the group",
                [
                    "stuck_at": .string(progress.stage), "drain_timeout_seconds": .double(configuration.drainTimeout),
                    "margin_seconds": .double(ShutdownDeadline.seconds(ShutdownDeadline.margin)),
                ])
            logger.writer.flush()
        }
        beating.cancel()
        logger.info(
            "shutting down",
            [
                "reason": .string(reason), "drain_timeout_seconds": .double(configuration.drainTimeout),
                "margin_seconds": .double(ShutdownDeadline.seconds(ShutdownDeadline.margin)),
            ])
        readiness.setNotReady(Readiness.Condition.consumerGroup, reason: "shutting down")
        let stopped = await runtime.shutdown(deadline: deadline)
        watchdog.cancel()
        if let failure = stopped.publishFailure {
            logger.critical(
                "exiting with code 1: results could not be published, so their records were not "
                    + "committed and the group processes them again", ["error": .string(failure)])
            return 1
        }
        guard stopped.isClean else {
            logger.error(
                "exiting with code 1: the shutdown was not clean",
                [
                    "problems": .array(stopped.problems.map { .string($0) })
                ])
            return 1
        }
        return 0
    }
}
