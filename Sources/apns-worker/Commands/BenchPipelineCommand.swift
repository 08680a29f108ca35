// `apns-worker bench pipeline`: end-to-end throughput, CPU, latency and memory.

import APNsSimulator
import Foundation
import Worker
import WorkerDev

struct BenchPipelineCommand: Command {
    static let name = "bench pipeline"
    static let summary = "Measure the whole pipeline: mock Kafka → worker → APNs simulator → outcomes."
    static let discussion = """
        Phase 1 pre-fills the requests topic and measures events/s, notifications/s and CPU per
        notification while the worker drains it; phase 2 feeds events at half that rate and reports
        the p50/p99 time from each event's occurred_at to its acknowledged outcome. Build with
        -c release for meaningful numbers. With --compare-h2load, h2load runs three times between the
        phases as `bench send --compare-h2load` runs it, and the report prints the worker's CPU per
        notification over h2load's per request in the median run, both from the same minute.

        example: swift run -c release apns-worker bench pipeline --count 50000
        """
    static let options: [OptionSpec] = [
        .value(
            "--count", "N",
            "Events in the backlog phase, at most \(PipelineBenchmark.maximumBacklog) (the mock cluster "
                + "keeps about 5 MB per partition and drops older records). Default: 20000."),
        .value("-n", "N", "Same as --count (as in h2load)."),
        .value("--latency-seconds", "S", "Length of the paced latency phase. Default: 5."),
        .value(
            "--idle-seconds", "S",
            "Idle time after the live phase before the RSS is read again (memory given back). Default: 12."),
        .value(
            "--max-in-flight", "N",
            "pipeline.max_in_flight_records, the bound on records in flight (below it the cap follows the "
                + "APNs pools). Default: the worker's default."),
        .value(
            "--timeline-ms", "MS",
            "Every MS milliseconds while the backlog drains, print records finished and in flight, the cap, "
                + "connections, streams in flight, requests queued and results unacknowledged. Default: off."),
        .value(
            "--threads", "N",
            "pipeline.threads, the worker's event loops (records, rules and APNs connections). Default: the "
                + "worker's default, one per CPU the process may use."),
        .value(
            "--max-connections", "N",
            "apns.max_connections, the connections each APNs pool may grow to under load (the dev stack has a "
                + "pool per environment). Default: the worker's default."),
        .value(
            "--apns-latency-ms", "SPEC",
            "The simulator's answer latency, as for `simulator --latency-ms`: FIXED, MIN-MAX, exp:MEAN or "
                + "FIXED+exp:MEAN. Prints the rate the streams and the in-flight cap allow at it. Default: 0."),
        .value(
            "--apns-handshake-ms", "MS",
            "How long the simulator holds each new connection's TLS handshake, as for `simulator --handshake-ms`: "
                + "what connecting to a far server costs. Default: two round trips of --apns-latency-ms's fixed "
                + "part (TCP and TLS)."),
        .value(
            "--kafka-brokers", "HOST:PORT[,...]",
            "Run against an outside Kafka cluster instead of librdkafka's mock one: the benchmark creates its "
                + "topics there (replication factor 1), named with a prefix unique to the run. --count may then go "
                + "up to 1000000. Default: the mock cluster, in this process."),
        .repeated(
            "--kafka-property", "NAME=VALUE",
            "A librdkafka property for the worker's clients (kafka.properties), for example linger.ms=20; "
                + "repeat for more. Default: none beyond the dev stack's."),
        .flag(
            "--exactly-once",
            "kafka.exactly_once: results and offsets in Kafka transactions (the mock cluster's, which cost no "
                + "broker time: a lower bound of the cost)."),
        .flag(
            "--compare-h2load",
            "After the backlog phase, run h2load three times as `bench send --compare-h2load` does with its "
                + "defaults (an h2o started for it) and print the worker's CPU per notification over h2load's per "
                + "request in the median run."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        var options = PipelineBenchmark.Options()
        if arguments.value("--count") != nil && arguments.value("-n") != nil {
            throw UsageError(message: "give the number of events once: --count N (-n is the same option)")
        }
        let countOption = arguments.value("-n") != nil ? "-n" : "--count"
        options.kafkaBrokers = arguments.value("--kafka-brokers")
        if let brokers = options.kafkaBrokers, brokers.split(separator: ",").contains(where: { !$0.contains(":") }) {
            throw UsageError(message: "--kafka-brokers takes host:port pairs separated by commas, got '\(brokers)'")
        }
        let largestBacklog = options.kafkaBrokers == nil ? PipelineBenchmark.maximumBacklog : 1_000_000
        options.events =
            try arguments.integer(countOption, default: options.events, range: 1...largestBacklog) ?? options.events
        for property in arguments.all("--kafka-property") {
            guard let equals = property.firstIndex(of: "="), equals != property.startIndex else {
                throw UsageError(
                    message: "--kafka-property takes NAME=VALUE (for example linger.ms=20), got '\(property)'")
            }
            options.kafkaProperties[String(property[..<equals])] = String(property[property.index(after: equals)...])
        }
        options.latencySeconds = Double(try arguments.integer("--latency-seconds", default: 5, range: 1...600) ?? 5)
        options.idleSeconds = Double(try arguments.integer("--idle-seconds", default: 12, range: 0...600) ?? 12)
        options.maxInFlight = try arguments.integer("--max-in-flight", range: 1...1_000_000)
        if let milliseconds = try arguments.integer("--timeline-ms", range: 10...60_000) {
            options.timelineInterval = .milliseconds(milliseconds)
        }
        options.threads = try arguments.integer("--threads", range: 1...64)
        options.maxConnections = try arguments.integer("--max-connections", range: 1...64)
        options.exactlyOnce = arguments.has("--exactly-once")
        if let spec = arguments.value("--apns-latency-ms") {
            options.apnsLatency = try SimulatorCommand.latency(spec, option: "--apns-latency-ms")
        }
        if let milliseconds = try arguments.integer("--apns-handshake-ms", range: 0...600_000) {
            options.apnsHandshakeMilliseconds = Double(milliseconds)
        }
        if arguments.has("--compare-h2load") { options.reference = { try await h2loadReference() } }
        FileHandle.standardOutput.write(Data("bench pipeline: memory allocator \(MemoryAllocator.description)\n".utf8))
        return await PipelineBenchmark.run(options) { line in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
