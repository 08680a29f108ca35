// `apns-worker bench send`: pushes N notifications through the APNs client as fast as the pool allows and
// reports throughput, CPU per notification, latency percentiles and memory; optionally runs h2load with the
// same request shape against the same server for comparison.

import APNs
import Foundation
import HTTP2
import JSON
import Platform

struct BenchSendCommand: Command {
    static let name = "bench send"
    static let summary = "Measure send throughput, CPU per notification, latency and memory (optionally vs h2load)."
    static let discussion = """
        Sends --count notifications (distinct device tokens, a fresh apns-id each, a real ES256 provider
        token) through the same client the worker uses, from connections × streams concurrent senders,
        and prints notifications/s, CPU µs per notification (getrusage of this process), p50/p99
        latency, peak RSS and RSS as the run progresses. Without --endpoint it starts h2o on a free
        loopback port (self-signed certificate, mruby handler answering 200) and stops it afterwards.
        Without --key-file it signs with an ephemeral P-256 key made in memory.
        --compare-h2load then runs h2load (same method, headers, body size, connections -c and
        streams -m, distinct paths via -i) against the same server and prints both and the ratios.
        h2load is given a same-length stand-in for the JWT, so no token reaches a command line.
        The count option is --count (this CLI's options all start with --).

        example:
          apns-worker bench send --count 1000000 --connections 1 --streams 100 --compare-h2load
        """
    static let options: [OptionSpec] =
        ClientOptions.connectionOptions + [
            .value("--count", "N", "Notifications to send (1-100000000). Default: 100000."),
            .value("--connections", "C", "HTTP/2 connections (1-64). Default: 1."),
            .value("--streams", "M", "Concurrent streams per connection (1-10000). Default: 100."),
            .value("--loop-threads", "T", "Event-loop threads of the client (1-16). Default: 1."),
            .value("--payload-bytes", "B", "Size of the JSON payload (40-4096). Default: 200."),
            .value("--server-threads", "S", "Threads of the h2o started when --endpoint is not given. Default: 1."),
            .value("--topic", "BUNDLE", "apns-topic to send. Default: com.example.bench."),
            .value(
                "--layer", "LAYER",
                "client (default): APNsClient.send with a RetryPolicy, as the worker sends; "
                    + "transport: prebuilt HTTP/2 requests straight to the ConnectionPool (the engine alone)."),
            .value(
                "--executor", "WHERE",
                "loop (default): the senders run on the event-loop threads "
                    + "(EventLoopGroup.taskExecutor()); default: on Swift's global executor."),
            .value(
                "--warm-up", "N",
                "Notifications sent before measuring (0-10000000). Default: min(count, "
                    + "max(2000, 4 × connections × streams))."),
            .value(
                "--attempts", "N",
                "Client layer: attempts per notification (1-20), retrying as RetryPolicy "
                    + "does with 10-500 ms back-off. Default: 1."),
            .flag("--compare-h2load", "Also run h2load with the same request shape and print the ratios."),
            .flag("--json", "Also print the figures as one JSON object on the last line."),
        ] + ClientOptions.credentialOptions

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let settings = try BenchSendSettings(arguments)
        if settings.layer == "render" {
            return try renderOnly(count: settings.count, topic: settings.topic, payloadBytes: settings.payloadBytes)
        }
        if arguments.value("--endpoint") == nil, arguments.value("--ca-file") != nil {
            throw UsageError(
                message: "--ca-file goes with --endpoint; without --endpoint the bench starts h2o with "
                    + "its own certificate")
        }
        let directory = NSTemporaryDirectory() + "apns-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try await BenchSendTarget.start(settings, arguments, directory: directory)
        defer { target.stop() }

        let (client, group, credential) = try makeClient(settings, arguments, target: target)
        let workload = try makeWorkload(settings, client: client, credential: credential)
        let load = ProcessReadings.loadAverage()
        printHeading(settings, target: target, workload: workload, load: load)
        let (ours, run, rss) = try await measure(
            client, group: group, workload: workload, settings: settings,
            arguments: arguments)
        await client.shutdown(gracePeriod: .seconds(2))
        await group.shutdown()

        var theirs: H2LoadResult?
        if arguments.has("--compare-h2load") {
            theirs = try await runH2Load(
                workload: workload, endpoint: target.endpoint, count: settings.count,
                connections: settings.connections, streams: settings.streams, directory: directory)
        }
        printReport(ours: ours, theirs: theirs, rss: rss, firstError: run.firstError)
        if settings.attempts > 1 {
            print("retried notifications: \(run.retried), attempts in all: \(run.attempts)")
        }
        if arguments.has("--json") {
            printJSON(ours: ours, theirs: theirs, run: run, rss: rss, settings: settings, load: load.oneMinute)
        }
        return run.failures == 0 ? 0 : 1
    }

    /// The client the worker would use, with the bench's credential (or an ephemeral key) and pool shape.
    static func makeClient(_ settings: BenchSendSettings, _ arguments: ParsedArguments, target: BenchSendTarget)
        throws -> (APNsClient, EventLoopGroup, APNsCredential)
    {
        let credential: APNsCredential
        if let given = try ClientOptions.credential(arguments, required: false) {
            credential = given
        } else {
            let key = try ProviderTokenKey.generate(keyID: "BENCH00001", teamID: "BENCHTEAM1")
            credential = .token(try ProviderTokenSigner(key: key))
        }
        var configuration = APNsClient.Configuration(credential: credential)
        configuration.endpointOverride = target.endpoint
        if let caFile = target.caFile { configuration.trustRoots = .caFile(caFile) }
        configuration.connectionsPerEnvironment = settings.connections
        configuration.maximumConcurrentStreamsPerConnection = settings.streams
        configuration.maximumQueuedRequests = max(10_000, settings.concurrency * 2)
        configuration.requestTimeout = .seconds(30)
        let group = EventLoopGroup(threadCount: settings.loopThreads)
        let client = try ClientOptions.makeClient(configuration, group: group)
        return (client, group, credential)
    }

    /// The notifications, with the transport layer's prebuilt requests when that layer is measured.
    static func makeWorkload(_ settings: BenchSendSettings, client: APNsClient, credential: APNsCredential) throws
        -> BenchSendWorkload
    {
        var workload = try BenchSendWorkload(topic: settings.topic, payloadBytes: settings.payloadBytes)
        if settings.layer == "transport" {
            let token: String?
            if case .token(let signer) = credential { token = try signer.token().jwt } else { token = nil }
            workload.prepareTransportRequests(
                authorization: token,
                authority: client.pool(for: .production).authority)
        }
        return workload
    }

    static func printHeading(
        _ settings: BenchSendSettings, target: BenchSendTarget, workload: BenchSendWorkload,
        load: (oneMinute: Double, cpus: Int)
    ) {
        print("bench send: \(settings.count) notifications to \(target.endpoint) [\(target.serverName)]")
        print(
            "  layer \(settings.layer), senders on the \(settings.executorChoice) executor, "
                + "\(settings.connections) connection(s) × \(settings.streams) streams, \(settings.loopThreads) loop "
                + "thread(s), payload \(workload.payloadByteCount) bytes; load average "
                + "\(String(format: "%.2f", load.oneMinute)) on \(load.cpus) CPUs before the run; "
                + "\(MemoryAllocator.description)")
    }

    /// Warms up (opens the connections, lets the server and both sides reach steady state), then sends
    /// `count` notifications and measures them.
    static func measure(
        _ client: APNsClient, group: EventLoopGroup, workload: BenchSendWorkload, settings: BenchSendSettings,
        arguments: ParsedArguments
    ) async throws -> (BenchSendFigures, BenchSendRunResult, rss: [(Int, Int)]) {
        let warmUp = try settings.warmUpCount(arguments)
        let executor: (any TaskExecutor)? = settings.executorChoice == "loop" ? group.taskExecutor() : nil
        if warmUp > 0 {
            _ = await drive(
                client, workload: workload, count: warmUp, concurrency: settings.concurrency,
                sampler: nil, executor: executor, policy: settings.policy)
        }
        let count = settings.count
        let sampler = BenchSendRSSSampler(total: count)
        let cpuBefore = ProcessReadings.cpuMicroseconds()
        let start = MonotonicClock.now()
        let run = await drive(
            client, workload: workload, count: count, concurrency: settings.concurrency,
            sampler: sampler, executor: executor, policy: settings.policy)
        let elapsed = Double(MonotonicClock.now() - start) / 1e9
        let cpu = ProcessReadings.cpuMicroseconds() - cpuBefore
        sampler.stop()
        let ours = BenchSendFigures(
            rate: Double(count) / elapsed,
            cpuMicrosecondsPerRequest: Double(cpu) / Double(count),
            p50Milliseconds: Double(run.histogram.value(at: 0.50)) / 1e6,
            p99Milliseconds: Double(run.histogram.value(at: 0.99)) / 1e6,
            peakRSSMiB: Double(ProcessReadings.peakRSSKiB()) / 1024, failures: run.failures, seconds: elapsed)
        return (ours, run, sampler.checkpoints)
    }

    /// Measures only what the client does before the transport: token, validation, rendering.
    static func renderOnly(count: Int, topic: String, payloadBytes: Int) throws -> Int32 {
        let workload = try BenchSendWorkload(topic: topic, payloadBytes: payloadBytes)
        let key = try ProviderTokenKey.generate(keyID: "BENCH00001", teamID: "BENCHTEAM1")
        let signer = try ProviderTokenSigner(key: key)
        var bytes = 0
        let cpuBefore = ProcessReadings.cpuMicroseconds()
        for index in 0..<count {
            let wire = try workload.request(index).validatedWire(authorization: try signer.token().jwt)
            bytes &+= wire.body.count &+ wire.headers.count
        }
        let cpu = ProcessReadings.cpuMicroseconds() - cpuBefore
        print("render: \(String(format: "%.2f", Double(cpu) / Double(count))) CPU µs per request (\(bytes) bytes)")
        return 0
    }
}
