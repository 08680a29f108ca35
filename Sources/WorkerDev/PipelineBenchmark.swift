// `apns-worker bench pipeline`: end to end on one machine — mock cluster → worker → simulator →
// outcomes acknowledged. Phase 1 drains a pre-filled backlog for throughput and CPU; phase 2 feeds
// events at half that rate for the event-to-outcome latency a live stream sees.

import APNs
public import APNsSimulator
import Foundation
import Kafka
import Platform
import PushRules
import Synchronization
import Worker

#if canImport(Glibc)
import Glibc
#endif

public enum PipelineBenchmark {
    public struct Options: Sendable {
        public var events = 20_000
        /// Seconds of the paced latency phase. Default: 5.
        public var latencySeconds = 5.0
        /// `pipeline.max_in_flight_records`; nil keeps the worker's default.
        public var maxInFlight: Int?
        /// `pipeline.threads`, the worker's event loops; nil keeps the worker's default (one per CPU).
        public var threads: Int?
        /// `apns.max_connections`, what each pool may grow to; nil keeps the worker's default.
        public var maxConnections: Int?
        /// How long the benchmark idles after the live phase before it reads the RSS again. Default: 12 s.
        public var idleSeconds = 12.0
        /// How long the simulator waits before answering each request. Default: none.
        public var apnsLatency = LatencyDistribution.none
        /// How long the simulator holds each new connection's TLS handshake; nil: two round trips of the
        /// latency's fixed part (TCP's and TLS 1.3's), what a connection to a server that far costs before its
        /// first request. Default: nil.
        public var apnsHandshakeMilliseconds: Double?
        /// The handshake hold in force: `apnsHandshakeMilliseconds`, else two of the latency's round trips.
        public var effectiveHandshakeMilliseconds: Double {
            apnsHandshakeMilliseconds ?? 2 * apnsLatency.fixedMilliseconds
        }
        /// Prints a line every this often while the backlog drains: records finished and in flight, the cap,
        /// and where the records are (streams at APNs, requests queued, results unacknowledged). Default: never.
        public var timelineInterval: Duration?
        /// `kafka.exactly_once`: results and offsets in Kafka transactions. Default: false.
        public var exactlyOnce = false
        /// Brokers of an outside cluster (`host:port,...`) to run against instead of librdkafka's mock
        /// cluster; the benchmark creates its topics there, under a name prefix unique to the run. Default: nil.
        public var kafkaBrokers: String?
        /// librdkafka properties for the worker's clients (`kafka.properties`), over the dev stack's own.
        public var kafkaProperties: [String: String] = [:]
        /// A reference client measured right after the backlog phase, while the worker idles, so that the
        /// worker's CPU per notification is compared with it in the same minute. Default: none.
        public var reference: (@Sendable () async throws -> ReferenceRun)?
        public init() {}
    }

    /// A reference client's CPU per request (h2load's, in `bench pipeline --compare-h2load`).
    public struct ReferenceRun: Sendable {
        /// The client's name ("h2load").
        public var name: String
        /// How it ran and against what, for the report.
        public var setup: String
        /// Requests and CPU of the run the ratio uses (the median, when the client ran several times).
        public var requests: Int
        public var cpuMicroseconds: Int64
        /// Every run's CPU per request, in the order they ran (this run's alone unless the client ran several
        /// times and this is their median).
        public var microsecondsPerRequestOfEachRun: [Double] = []
        public init(name: String, setup: String, requests: Int, cpuMicroseconds: Int64) {
            self.name = name
            self.setup = setup
            self.requests = requests
            self.cpuMicroseconds = cpuMicroseconds
            microsecondsPerRequestOfEachRun = [cpuMicrosecondsPerRequest]
        }
        public var cpuMicrosecondsPerRequest: Double { Double(cpuMicroseconds) / Double(max(1, requests)) }
    }

    /// The largest backlog the mock cluster holds whole: librdkafka's mock keeps about 5 MB per partition
    /// and drops the oldest records beyond it, so a larger pre-fill would lose records before the worker
    /// reads them (6 partitions of about 400-byte sample events).
    public static let maximumBacklog = 60_000
    /// How long the benchmark waits without a single record finishing before it gives up.
    static let stallTimeout: Duration = .seconds(30)

    public static func run(_ options: Options, print: @escaping @Sendable (String) -> Void) async -> Int32 {
        let writer = LogWriter(configuration: .init(level: .error))
        defer { writer.close() }
        do {
            let stack = try DevStack(
                failureRate: 0, latency: options.apnsLatency,
                handshakeMilliseconds: options.effectiveHandshakeMilliseconds, metricsListen: "127.0.0.1:0",
                group: "bench",
                maxInFlight: options.maxInFlight, threads: options.threads,
                maxConnections: options.maxConnections, unregisteredEvery: 0, malformedEvery: 0,
                keepsAcceptedNotifications: false, exactlyOnce: options.exactlyOnce,
                outsideBrokers: options.kafkaBrokers, kafkaProperties: options.kafkaProperties)
            defer { stack.simulator.stop() }
            var generator = stack.generator
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    client: KafkaConfiguration(bootstrapServers: stack.bootstrapServers)))
            let requestsTopic = stack.requestsTopic
            if let brokers = options.kafkaBrokers {
                try await stack.createTopicsIfOutside(with: producer)
                print("bench pipeline: Kafka at \(brokers), topics created as \(stack.topicPrefix)*")
            }
            for (name, value) in options.kafkaProperties.sorted(by: { $0.key < $1.key }) {
                print("bench pipeline: kafka.properties \(name)=\(value)")
            }

            print("bench pipeline: pre-filling \(options.events) events into \(requestsTopic)")
            for sequence in 0..<options.events {
                let (key, value) = generator.event(sequence: sequence, occurredAt: Date().timeIntervalSince1970)
                try await producer.send(topic: requestsTopic, key: key, value: value, onDelivery: { _ in })
            }
            try await producer.flush(timeout: .seconds(60))

            let latencies = LatencyRecorder()
            let runtime = try WorkerRuntime(
                configuration: stack.configuration, rules: stack.rules, metrics: WorkerMetrics(),
                readiness: Readiness(),
                logger: Logger(writer: writer), observer: latencies, preloadedCredentials: stack.credentials)
            try await runtime.start()
            // The clock starts at the first record, not while the consumer joins its group.
            while runtime.pipeline.counters.recordsTaken == 0 { try await Task.sleep(for: .milliseconds(1)) }
            let cpuBefore = processCPUSeconds()
            let partsBefore = ThreadCPU.snapshot()
            let started = ContinuousClock.now
            let simulator = stack.simulator
            // The timeline (when asked for) prints from a task of its own; the peaks are sampled below.
            let timeline = options.timelineInterval.map { timelineInterval in
                Task {
                    var nextLine = started + timelineInterval
                    while !Task.isCancelled {
                        if ContinuousClock.now >= nextLine {
                            nextLine = nextLine + timelineInterval
                            let pools = runtime.apnsPoolTotals
                            print(
                                String(
                                    format:
                                        "  %6.2f s: %6d records finished, %5d in flight (cap %5d), %6d notifications "
                                        + "answered, %2d connections, %5d streams in flight, %5d requests queued, "
                                        + "%5d results unacknowledged",
                                    (ContinuousClock.now - started).seconds, runtime.pipeline.counters.recordsFinished,
                                    runtime.pipeline.recordsInFlight, runtime.pipeline.recordsInFlightLimit,
                                    simulator.stats.requests, pools.connectionsOpen, pools.streamsInFlight,
                                    pools.requestsQueued, runtime.resultsUnacknowledged))
                        }
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                }
            }
            var steady = SteadyWindow(events: options.events)
            // The CPU of the same window as the steady rate: the whole phase's also counts the ramp (the
            // first round trip, the heap's growth to the in-flight cap: page faults) and the drain's last
            // round trip with few requests per write, which move with the run's length, not the build.
            // Its notifications are counted as the steady rate counts them, records finished in the window at
            // the backlog's notifications per record: the simulator's count of requests would say none when a
            // short backlog's requests all went out before the window began (every record in flight at once).
            var steadyStart: (threads: ThreadCPU.Snapshot, finished: Int)?
            var steadyCPU: (parts: ThreadCPU, records: Int)?
            // The peaks are sampled on the benchmark's own task, at every 5 ms progress poll and once when every
            // record has finished (the pools' connections are still open then): a task of their own could be
            // scheduled too late on a loaded machine to see a short run at all (a CI run printed 0 connections).
            var peaks = PipelinePeaks()
            func observePeaks() {
                peaks.observe(
                    connections: runtime.apnsPoolTotals.connectionsOpen, cap: runtime.pipeline.recordsInFlightLimit,
                    inFlight: runtime.pipeline.recordsInFlight, at: (ContinuousClock.now - started).seconds)
            }
            try await waitUntilFinished(options.events, runtime.pipeline) { finished in
                observePeaks()
                switch steady.observe(finished: finished) {
                case .started:
                    steadyStart = (ThreadCPU.snapshot(), finished)
                case .ended:
                    if let steadyStart {
                        steadyCPU = (ThreadCPU.since(steadyStart.threads), finished - steadyStart.finished)
                    }
                case nil:
                    break
                }
            }
            let elapsed = (ContinuousClock.now - started).seconds
            observePeaks()
            timeline?.cancel()
            // Threads first, the process last: the threads' window then lies within the process's, so
            // their sum (exact clocks) never exceeds the process's CPU.
            let parts = ThreadCPU.since(partsBefore)
            let cpu = processCPUSeconds() - cpuBefore
            let notifications = stack.simulator.stats.requests
            let rate = Double(options.events) / elapsed
            print(
                String(
                    format:
                        "phase 1 (backlog): %d events, %d notifications in %.2f s: %.0f events/s, %.0f notifications/s",
                    options.events, notifications, elapsed, rate, Double(notifications) / elapsed))
            let notificationsPerEvent = Double(notifications) / Double(options.events)
            let steadyNotificationRate = steady.eventsPerSecond.map { $0 * notificationsPerEvent }
            if let line = steady.description(notificationsPerEvent: notificationsPerEvent) { print(line) }
            print(
                String(
                    format: "  CPU %.2f s = %.1f µs per notification (the whole process: worker, simulator",
                    cpu, cpu * 1e6 / Double(max(1, notifications))) + (stack.cluster == nil ? ")" : " and mock Kafka)"))
            let perNotification = { (seconds: Double) in seconds * 1e6 / Double(max(1, notifications)) }
            print(
                String(
                    format: "  by part, µs per notification: worker %.1f, APNs simulator %.1f, ",
                    perNotification(parts.worker), perNotification(parts.simulator))
                    + (stack.cluster == nil
                        ? "Kafka brokers outside this process"
                        : String(format: "mock Kafka brokers %.1f", perNotification(parts.mockKafka))))
            print(
                String(
                    format: "  the worker's part by thread: event loops %.1f, Kafka clients %.1f, other %.1f",
                    perNotification(parts.eventLoops), perNotification(parts.kafkaClients),
                    perNotification(parts.worker - parts.eventLoops - parts.kafkaClients)))
            if parts.simulator > 0 {
                // The machine's speed moves by a fifth from run to run (the simulator's own µs per request
                // move with the worker's); the simulator does the same work per request in every run and
                // build, so the ratio compares builds where the µs cannot.
                print(
                    String(
                        format:
                            "  worker ÷ simulator CPU: %.2f (event loops %.2f, Kafka clients %.2f): compare builds by these",
                        parts.worker / parts.simulator, parts.eventLoops / parts.simulator,
                        parts.kafkaClients / parts.simulator))
            }
            let steadyWorkerMicroseconds = steadyCPU.flatMap { steady -> Double? in
                let steadyNotifications = Int((Double(steady.records) * notificationsPerEvent).rounded())
                guard steadyNotifications > 0 else { return nil }
                let perSteadyNotification = { (seconds: Double) in seconds * 1e6 / Double(steadyNotifications) }
                print(
                    String(
                        format:
                            "  steady state's CPU, µs per notification: worker %.1f (event loops %.1f, Kafka clients "
                            + "%.1f), APNs simulator %.1f, over %d notifications",
                        perSteadyNotification(steady.parts.worker), perSteadyNotification(steady.parts.eventLoops),
                        perSteadyNotification(steady.parts.kafkaClients), perSteadyNotification(steady.parts.simulator),
                        steadyNotifications))
                return perSteadyNotification(steady.parts.worker)
            }
            if let reference = options.reference {
                try await compare(
                    workerMicroseconds: perNotification(parts.worker),
                    steadyWorkerMicroseconds: steadyWorkerMicroseconds,
                    with: reference, print: print)
            }
            print(
                "  event loops \(parts.eventLoopThreads) (pipeline.threads "
                    + "\(stack.configuration.pipeline.effectiveThreads))")
            let peak = peaks
            print(
                "  APNs connections at most \(peak.connections) across \(runtime.apnsPoolCount) pools (each: apns.connections "
                    + "\(stack.configuration.apns.connections), max_connections \(stack.configuration.apns.maxConnections)); "
                    + "in-flight cap at most \(peak.cap), "
                    + "records in flight at most \(peak.inFlight) (max_in_flight_records "
                    + "\(stack.configuration.pipeline.maxInFlightRecords))")
            print(
                Self.describeGrowth(
                    connections: peak.connections, reachedAfter: peak.connectionsReachedAt,
                    handshakeMilliseconds: options.effectiveHandshakeMilliseconds))
            print(
                Self.describeBounds(
                    latency: options.apnsLatency, connections: peak.connections,
                    maximumConcurrentStreams: Int(stack.simulator.faults.maxConcurrentStreams),
                    maxInFlightRecords: peak.cap,
                    notificationsPerEvent: notificationsPerEvent,
                    measured: steadyNotificationRate ?? Double(notifications) / elapsed))

            // Phase 2: a live stream at half the measured rate; occurred_at is the moment of producing.
            latencies.reset()
            let pace = max(100, rate / 2)
            let count = Int(pace * options.latencySeconds)
            // Paced per millisecond, not per event: a sleep per event (6,000-13,000 a second) woke
            // Dispatch's timer thread each time and added its CPU to what the phase measures.
            let phaseStart = ContinuousClock.now
            var produced = 0
            while produced < count {
                let elapsed = (ContinuousClock.now - phaseStart) / .seconds(1)
                let due = min(count, Int(elapsed * pace) + 1)
                while produced < due {
                    let (key, value) = generator.event(
                        sequence: options.events + produced,
                        occurredAt: Date().timeIntervalSince1970)
                    try await producer.send(topic: requestsTopic, key: key, value: value, onDelivery: { _ in })
                    produced += 1
                }
                if produced < count { try await Task.sleep(for: .milliseconds(1)) }
            }
            try await producer.flush(timeout: .seconds(30))
            try await waitUntilFinished(options.events + count, runtime.pipeline)
            let (p50, p99) = latencies.percentiles()
            print(
                String(
                    format: "phase 2 (live, %.0f events/s for %.0f s): event → outcome p50 %.1f ms, p99 %.1f ms",
                    pace, options.latencySeconds, p50 * 1000, p99 * 1000))
            // Memory a worker gives back once the backlog is gone: jemalloc purges freed pages within
            // its decay time (10 s), from its background thread (MemoryAllocator).
            try await Task.sleep(for: .seconds(options.idleSeconds))
            let idleRSS = Double(ProcessMemory.residentKiB()) / 1024
            // The peak of the whole run, idle time included (RSS can still creep up a little while idle),
            // read after the idle RSS so that it is never below it.
            print(
                String(
                    format: "peak RSS %.0f MB (max_in_flight_records %d)", max(peakRSSMegabytes(), idleRSS),
                    stack.configuration.pipeline.maxInFlightRecords))
            print(String(format: "RSS after %.0f s idle: %.0f MB", options.idleSeconds, idleRSS))
            await runtime.shutdown(timeout: 5)
            try? await producer.close(timeout: .seconds(2))
            writer.close()
            await stack.cluster?.stop()
            return 0
        } catch {
            print("bench pipeline: \(error)")
            return 1
        }
    }

    /// Runs the reference client now (the worker idles between the phases) and prints the worker's CPU per
    /// notification over the reference's per request: one run's ratio, where the µs of two separate runs
    /// differ by as much as the machine's speed moves between them (docs/performance.md).
    static func compare(
        workerMicroseconds: Double, steadyWorkerMicroseconds: Double?,
        with reference: @Sendable () async throws -> ReferenceRun, print: @Sendable (String) -> Void
    ) async throws {
        let run = try await reference()
        let runs = run.microsecondsPerRequestOfEachRun
        let spread =
            runs.count > 1
            ? " (the median of \(runs.count) runs: "
                + runs.map { String(format: "%.2f", $0) }.joined(separator: ", ") + ")" : ""
        print(
            "  \(run.name) \(run.setup): "
                + String(
                    format: "%.2f µs CPU per request over %d requests", run.cpuMicrosecondsPerRequest, run.requests)
                + spread)
        print(
            "  worker ÷ \(run.name) CPU: "
                + String(
                    format: "%.2f (%.1f µs per notification over %.2f µs per request, in this run)",
                    workerMicroseconds / run.cpuMicrosecondsPerRequest, workerMicroseconds,
                    run.cpuMicrosecondsPerRequest))
        if let steadyWorkerMicroseconds {
            print(
                "  worker ÷ \(run.name) CPU in the steady state: "
                    + String(
                        format: "%.2f (%.1f µs per notification over %.2f µs per request)",
                        steadyWorkerMicroseconds / run.cpuMicrosecondsPerRequest, steadyWorkerMicroseconds,
                        run.cpuMicrosecondsPerRequest))
        }
    }

    /// Waits until `target` records have finished; fails rather than waiting forever when none finishes
    /// for `stallTimeout`.
    static func waitUntilFinished(
        _ target: Int, _ pipeline: Pipeline, progress: (_ finished: Int) -> Void = { _ in }
    ) async throws {
        var finished = pipeline.counters.recordsFinished
        var lastProgress = ContinuousClock.now
        while finished < target {
            try await Task.sleep(for: .milliseconds(5))
            let now = pipeline.counters.recordsFinished
            progress(now)
            if now != finished {
                finished = now
                lastProgress = ContinuousClock.now
            } else if ContinuousClock.now - lastProgress > stallTimeout {
                throw BenchmarkStalled(finished: finished, target: target, inFlight: pipeline.recordsInFlight)
            }
        }
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    static func peakRSSMegabytes() -> Double {
        Double(ProcessMemory.peakResidentKiB()) / 1024
    }
}

/// The backlog's steady state: the records finishing between 10 % and 90 % of it. The whole-run rate
/// also counts the first round trip, in which nothing can finish, and the drain of the last records;
/// at a 300 ms APNs latency those are a sixth of a 60,000-event run, so the whole-run rate says more
/// about the run's length than about the worker.
struct SteadyWindow {
    let first: Int
    let last: Int
    private var start: (at: ContinuousClock.Instant, finished: Int)?
    private var end: (at: ContinuousClock.Instant, finished: Int)?

    init(events: Int) {
        first = events / 10
        last = events - events / 10
    }

    /// A mark the window passed at an observation.
    enum Mark { case started, ended }

    /// The window ends at an observation after the one that started it: a poll delayed on a loaded machine
    /// may see both marks passed at once, and then the next one (the backlog's last at the latest) ends it.
    /// Returns the mark this observation passed, if any.
    @discardableResult
    mutating func observe(finished: Int) -> Mark? {
        guard let start else {
            if finished >= first {
                start = (ContinuousClock.now, finished)
                return .started
            }
            return nil
        }
        if end == nil, finished >= last, finished > start.finished {
            end = (ContinuousClock.now, finished)
            return .ended
        }
        return nil
    }

    /// Records finished per second within the window; nil when the backlog was too short to tell.
    var eventsPerSecond: Double? {
        guard let start, let end, end.at > start.at, end.finished > start.finished else { return nil }
        return Double(end.finished - start.finished) / (end.at - start.at).seconds
    }

    /// The line `bench pipeline` prints (notifications at the whole backlog's notifications per event).
    func description(notificationsPerEvent: Double) -> String? {
        guard let eventsPerSecond, let start, let end else { return nil }
        return String(
            format:
                "  steady state (records %d-%d finishing, without the first round trip and the drain): %.0f events/s, "
                + "%.0f notifications/s",
            start.finished, end.finished, eventsPerSecond, eventsPerSecond * notificationsPerEvent)
    }
}

/// The backlog or the live phase stopped making progress.
struct BenchmarkStalled: Error, CustomStringConvertible {
    var finished: Int
    var target: Int
    var inFlight: Int

    var description: String {
        "stalled: \(finished) of \(target) records finished, \(inFlight) in flight, none finished for "
            + "\(PipelineBenchmark.stallTimeout)"
    }
}

/// Event time → acknowledged outcome latencies of the current phase.
final class LatencyRecorder: PipelineObserver {
    let samples = Mutex<[Double]>([])

    /// Called once a record's outcomes are acknowledged by Kafka, so the latency runs to that moment rather than
    /// to the outcome's `completed_at` (when the APNs answer came).
    func outcomesPublished(_ outcomes: PublishedOutcomes, eventTime: Double?) {
        guard let eventTime, outcomes.count > 0 else { return }
        let latency = WallClockTime.seconds() - eventTime
        samples.withLock { $0.append(contentsOf: repeatElement(latency, count: outcomes.count)) }
    }

    func reset() { samples.withLock { $0.removeAll() } }

    func percentiles() -> (Double, Double) {
        let sorted = samples.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { return (0, 0) }
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
