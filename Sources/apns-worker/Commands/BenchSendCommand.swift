// `apns-worker bench send`: pushes N notifications through the APNs client as fast as the pool allows and
// reports throughput, CPU per notification, latency percentiles and memory; optionally runs h2load with the
// same request shape against the same server for comparison.
import APNs
import Foundation
import HTTP2
import JSON
import Platform
import Synchronization

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
    static let options: [OptionSpec] = ClientOptions.connectionOptions + [
        .value("--count", "N", "Notifications to send (1-100000000). Default: 100000."),
        .value("--connections", "C", "HTTP/2 connections (1-64). Default: 1."),
        .value("--streams", "M", "Concurrent streams per connection (1-10000). Default: 100."),
        .value("--loop-threads", "T", "Event-loop threads of the client (1-16). Default: 1."),
        .value("--payload-bytes", "B", "Size of the JSON payload (40-4096). Default: 200."),
        .value("--server-threads", "S", "Threads of the h2o started when --endpoint is not given. Default: 1."),
        .value("--topic", "BUNDLE", "apns-topic to send. Default: com.example.bench."),
        .value("--layer", "LAYER", "client (default): APNsClient.send with a RetryPolicy, as the worker sends; "
            + "transport: prebuilt HTTP/2 requests straight to the ConnectionPool (the engine alone)."),
        .value("--executor", "WHERE", "loop (default): the senders run on the event-loop threads "
            + "(EventLoopGroup.taskExecutor()); default: on Swift's global executor."),
        .value("--warm-up", "N", "Notifications sent before measuring (0-10000000). Default: min(count, "
            + "max(2000, 4 × connections × streams))."),
        .value("--attempts", "N", "Client layer: attempts per notification (1-20), retrying as RetryPolicy "
            + "does with 10-500 ms back-off. Default: 1."),
        .flag("--compare-h2load", "Also run h2load with the same request shape and print the ratios."),
        .flag("--json", "Also print the figures as one JSON object on the last line."),
    ] + ClientOptions.credentialOptions

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let count = try arguments.integer("--count", default: 100_000, range: 1...100_000_000)!
        let connections = try arguments.integer("--connections", default: 1, range: 1...64)!
        let streams = try arguments.integer("--streams", default: 100, range: 1...10_000)!
        let loopThreads = try arguments.integer("--loop-threads", default: 1, range: 1...16)!
        let payloadBytes = try arguments.integer("--payload-bytes", default: 200, range: 40...4096)!
        let serverThreads = try arguments.integer("--server-threads", default: 1, range: 1...64)!
        let topic = arguments.value("--topic") ?? "com.example.bench"
        let layer = arguments.value("--layer") ?? "client"
        let attempts = try arguments.integer("--attempts", default: 1, range: 1...20)!
        let policy = attempts == 1 ? RetryPolicy.never : RetryPolicy(maximumAttempts: attempts,
            maximumTotalTime: .seconds(60),
            backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(500)))
        let executorChoice = arguments.value("--executor") ?? "loop"
        guard executorChoice == "loop" || executorChoice == "default" else {
            throw UsageError(message: "--executor must be loop or default, got '\(executorChoice)'")
        }
        guard layer == "client" || layer == "transport" || layer == "render" else {
            throw UsageError(message: "--layer must be client, transport or render, got '\(layer)'")
        }
        if layer == "render" { return try renderOnly(count: count, topic: topic, payloadBytes: payloadBytes) }
        if arguments.value("--endpoint") == nil, arguments.value("--ca-file") != nil {
            throw UsageError(message: "--ca-file goes with --endpoint; without --endpoint the bench starts h2o with "
                + "its own certificate")
        }

        let directory = NSTemporaryDirectory() + "apns-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        var server: H2OReferenceServer?
        defer { server?.stop() }
        let endpoint: String
        let caFile: String?
        let serverName: String
        if let given = arguments.value("--endpoint") {
            endpoint = given
            caFile = arguments.value("--ca-file")
            serverName = given
        } else {
            let started = try await H2OReferenceServer.start(directory: directory, threads: serverThreads,
                maximumStreams: streams)
            server = started
            stopOnInterrupt(pid: started.pid)
            endpoint = started.url
            caFile = started.caFile
            serverName = "\(await H2OReferenceServer.version()) (\(serverThreads) thread), mruby handler answering 200"
        }

        let credential: APNsCredential
        if let given = try ClientOptions.credential(arguments, required: false) {
            credential = given
        } else {
            let key = try ProviderTokenKey.generate(keyID: "BENCH00001", teamID: "BENCHTEAM1")
            credential = .token(try ProviderTokenSigner(key: key))
        }
        var configuration = APNsClient.Configuration(credential: credential)
        configuration.endpointOverride = endpoint
        if let caFile { configuration.trustRoots = .caFile(caFile) }
        configuration.connectionsPerEnvironment = connections
        configuration.maximumConcurrentStreamsPerConnection = streams
        configuration.maximumQueuedRequests = max(10_000, connections * streams * 2)
        configuration.requestTimeout = .seconds(30)
        let group = EventLoopGroup(threadCount: loopThreads)
        let client = try ClientOptions.makeClient(configuration, group: group)
        defer { _ = client }

        var workload = try BenchWorkload(topic: topic, payloadBytes: payloadBytes)
        if layer == "transport" {
            let token: String?
            if case .token(let signer) = credential { token = try signer.token().jwt } else { token = nil }
            workload.prepareTransportRequests(authorization: token,
                authority: client.pool(for: .production).authority)
        }
        let load = ProcessReadings.loadAverage()
        print("bench send: \(count) notifications to \(endpoint) [\(serverName)]")
        print("  layer \(layer), senders on the \(executorChoice) executor, \(connections) connection(s) × "
            + "\(streams) streams, \(loopThreads) loop thread(s), payload "
            + "\(workload.payloadByteCount) bytes; load average \(String(format: "%.2f", load.oneMinute)) "
            + "on \(load.cpus) CPUs before the run; \(MemoryAllocator.description)")

        // Warm up: open the connections, let the server and both sides reach steady state.
        let warmUp = try arguments.integer("--warm-up", default: min(count, max(2_000, connections * streams * 4)),
            range: 0...10_000_000)!
        let executor: (any TaskExecutor)? = executorChoice == "loop" ? group.taskExecutor() : nil
        if warmUp > 0 {
            _ = await drive(client, workload: workload, count: warmUp, concurrency: connections * streams,
                sampler: nil, executor: executor, policy: policy)
        }
        let sampler = RSSSampler(total: count)
        let cpuBefore = ProcessReadings.cpuMicroseconds()
        let start = MonotonicClock.now()
        let run = await drive(client, workload: workload, count: count, concurrency: connections * streams,
            sampler: sampler, executor: executor, policy: policy)
        let elapsed = Double(MonotonicClock.now() - start) / 1e9
        let cpu = ProcessReadings.cpuMicroseconds() - cpuBefore
        sampler.stop()
        let ours = Figures(rate: Double(count) / elapsed, cpuMicrosecondsPerRequest: Double(cpu) / Double(count),
            p50Milliseconds: Double(run.histogram.value(at: 0.50)) / 1e6,
            p99Milliseconds: Double(run.histogram.value(at: 0.99)) / 1e6,
            peakRSSMiB: Double(ProcessReadings.peakRSSKiB()) / 1024, failures: run.failures, seconds: elapsed)
        await client.shutdown(gracePeriod: .seconds(2))
        await group.shutdown()

        var theirs: H2LoadResult?
        if arguments.has("--compare-h2load") {
            theirs = try await runH2Load(workload: workload, endpoint: endpoint, count: count,
                connections: connections, streams: streams, directory: directory)
        }
        printReport(ours: ours, theirs: theirs, rss: sampler.checkpoints, firstError: run.firstError)
        if attempts > 1 {
            print("retried notifications: \(run.retried), attempts in all: \(run.attempts)")
        }
        if arguments.has("--json") {
            var report = reportJSON(ours: ours, theirs: theirs, rss: sampler.checkpoints, count: count,
                connections: connections, streams: streams, load: load.oneMinute)
            if layer == "client", case .object(var object) = report {
                object["attempts_total"] = .int(Int64(run.attempts))
                object["retried_notifications"] = .int(Int64(run.retried))
                report = .object(object)
            }
            print(report.compactString)
        }
        return run.failures == 0 ? 0 : 1
    }

    /// Measures only what the client does before the transport: token, validation, rendering.
    static func renderOnly(count: Int, topic: String, payloadBytes: Int) throws -> Int32 {
        let workload = try BenchWorkload(topic: topic, payloadBytes: payloadBytes)
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

    /// Ctrl-C or SIGTERM during the run must not leave the h2o the bench started behind.
    static func stopOnInterrupt(pid: pid_t) {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                kill(pid, SIGTERM)
                usleep(300_000)
                kill(pid, SIGKILL)
                exit(128 + signalNumber)
            }
            source.resume()
            interruptSources.append(source)
        }
    }

    /// Keeps the signal sources alive; written once per signal before the run, on one task.
    nonisolated(unsafe) private static var interruptSources: [any DispatchSourceSignal] = []

    struct Figures {
        var rate: Double
        var cpuMicrosecondsPerRequest: Double
        var p50Milliseconds: Double
        var p99Milliseconds: Double
        var peakRSSMiB: Double
        var failures: Int
        var seconds: Double
    }

    struct RunResult: Sendable {
        var histogram = LatencyHistogram()
        var failures = 0
        var attempts = 0
        var retried = 0
        var firstError: String?
    }

    /// `concurrency` senders share `count` notifications; each records its own latencies.
    static func drive(_ client: APNsClient, workload: BenchWorkload, count: Int, concurrency: Int,
                      sampler: RSSSampler?, executor: (any TaskExecutor)?, policy: RetryPolicy) async -> RunResult {
        if let executor {
            return await withTaskExecutorPreference(executor) {
                await drive(client, workload: workload, count: count, concurrency: concurrency, sampler: sampler,
                    policy: policy)
            }
        }
        return await drive(client, workload: workload, count: count, concurrency: concurrency, sampler: sampler,
            policy: policy)
    }

    static func drive(_ client: APNsClient, workload: BenchWorkload, count: Int, concurrency: Int,
                      sampler: RSSSampler?, policy: RetryPolicy) async -> RunResult {
        let next = BenchCounter()
        return await withTaskGroup(of: RunResult.self) { group in
            for _ in 0..<min(concurrency, count) {
                group.addTask {
                    var result = RunResult()
                    while true {
                        let index = next.take()
                        if index >= count { break }
                        let started = MonotonicClock.now()
                        var failure: String?
                        if let transportTemplate = workload.transportTemplate {
                            do {
                                let response = try await client.pool(for: .production)
                                    .send(workload.transportRequest(index, template: transportTemplate))
                                if response.status != 200 { failure = "HTTP status \(response.status)" }
                            } catch {
                                failure = "\(error)"
                            }
                        } else {
                            let delivery = await client.send(workload.request(index), policy: policy)
                            result.attempts += delivery.attempts.count
                            if delivery.attempts.count > 1 { result.retried += 1 }
                            if delivery.status != .delivered { failure = delivery.summary }
                        }
                        result.histogram.record(nanoseconds: MonotonicClock.now() - started)
                        if let failure {
                            result.failures += 1
                            if result.firstError == nil { result.firstError = failure }
                        }
                        sampler?.completed()
                    }
                    return result
                }
            }
            var total = RunResult()
            for await part in group {
                total.histogram.merge(part.histogram)
                total.failures += part.failures
                total.attempts += part.attempts
                total.retried += part.retried
                total.firstError = total.firstError ?? part.firstError
            }
            return total
        }
    }

    static func runH2Load(workload: BenchWorkload, endpoint: String, count: Int, connections: Int, streams: Int,
                          directory: String) async throws -> H2LoadResult {
        let bodyFile = directory + "/body.json"
        try Data(workload.payload).write(to: URL(fileURLWithPath: bodyFile))
        // Distinct device paths as our run uses; h2load takes scheme, host and port from the first line.
        let uriFile = directory + "/uris.txt"
        var lines: [String] = []
        for (index, token) in workload.tokens.enumerated() {
            lines.append((index == 0 ? endpoint : "") + "/3/device/" + token.hex)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: uriFile, atomically: true, encoding: .utf8)
        var arguments = ["-n", String(count), "-c", String(connections), "-m", String(streams), "-t", "1",
                         "-d", bodyFile, "-i", uriFile]
        for header in workload.h2loadHeaders { arguments += ["-H", header] }
        // Warm-up run, as for ours.
        _ = try await H2LoadResult.run(arguments: ["-n", String(min(count, max(2_000, connections * streams * 4)))]
            + arguments.dropFirst(2), directory: directory)
        return try await H2LoadResult.run(arguments: arguments, directory: directory)
    }

    static func printReport(ours: Figures, theirs: H2LoadResult?, rss: [(Int, Int)], firstError: String?) {
        func number(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
        func row(_ label: String, _ a: String, _ b: String = "", _ ratio: String = "") -> String {
            label.padding(toLength: 26, withPad: " ", startingAt: 0)
                + a.leftPadded(14) + b.leftPadded(14) + ratio.leftPadded(10)
        }
        print(row("", "apns-worker", theirs == nil ? "" : "h2load", theirs == nil ? "" : "ratio"))
        if let theirs {
            let theirCPU = Double(theirs.cpuMicroseconds) / Double(max(1, theirs.succeeded + theirs.failed))
            print(row("notifications/s", number(ours.rate, 0), number(theirs.requestsPerSecond, 0),
                number(ours.rate / theirs.requestsPerSecond, 2)))
            print(row("CPU µs/notification", number(ours.cpuMicrosecondsPerRequest, 2), number(theirCPU, 2),
                number(ours.cpuMicrosecondsPerRequest / theirCPU, 2)))
            print(row("p50 latency ms", number(ours.p50Milliseconds, 3), "-"))
            print(row("p99 latency ms", number(ours.p99Milliseconds, 3), "-"))
            print(row("mean / max latency ms", "-",
                "\(theirs.meanLatencyMilliseconds.map { number($0, 2) } ?? "?")/"
                    + "\(theirs.maximumLatencyMilliseconds.map { number($0, 1) } ?? "?")"))
            print(row("peak RSS MiB", number(ours.peakRSSMiB, 1), number(Double(theirs.peakRSSKiB) / 1024, 1)))
            print(row("failed", String(ours.failures), String(theirs.failed)))
        } else {
            print(row("notifications/s", number(ours.rate, 0)))
            print(row("CPU µs/notification", number(ours.cpuMicrosecondsPerRequest, 2)))
            print(row("p50 latency ms", number(ours.p50Milliseconds, 3)))
            print(row("p99 latency ms", number(ours.p99Milliseconds, 3)))
            print(row("peak RSS MiB", number(ours.peakRSSMiB, 1)))
            print(row("failed", String(ours.failures)))
        }
        if !rss.isEmpty {
            print("RSS MiB by progress: " + rss.map { "\($0.0)%: \(number(Double($0.1) / 1024, 1))" }
                .joined(separator: ", "))
        }
        if let firstError { print("first failure: \(firstError)") }
    }

    static func reportJSON(ours: Figures, theirs: H2LoadResult?, rss: [(Int, Int)], count: Int, connections: Int,
                           streams: Int, load: Double) -> JSONValue {
        var object: JSONObject = [
            "count": .int(Int64(count)), "connections": .int(Int64(connections)), "streams": .int(Int64(streams)),
            "load_average_before": .double(load),
            "notifications_per_second": .double(ours.rate.rounded()),
            "cpu_us_per_notification": .double((ours.cpuMicrosecondsPerRequest * 100).rounded() / 100),
            "p50_ms": .double((ours.p50Milliseconds * 1000).rounded() / 1000),
            "p99_ms": .double((ours.p99Milliseconds * 1000).rounded() / 1000),
            "peak_rss_mib": .double((ours.peakRSSMiB * 10).rounded() / 10),
            "failed": .int(Int64(ours.failures)),
            "rss_kib_by_percent": .object(JSONObject(rss.map { .init(key: String($0.0), value: .int(Int64($0.1))) })),
        ]
        if let theirs {
            let theirCPU = Double(theirs.cpuMicroseconds) / Double(max(1, theirs.succeeded + theirs.failed))
            object["h2load"] = [
                "requests_per_second": .double(theirs.requestsPerSecond),
                "cpu_us_per_request": .double((theirCPU * 100).rounded() / 100),
                "peak_rss_mib": .double((Double(theirs.peakRSSKiB) / 1024 * 10).rounded() / 10),
                "failed": .int(Int64(theirs.failed)),
            ]
            object["throughput_ratio"] = .double((ours.rate / theirs.requestsPerSecond * 1000).rounded() / 1000)
            object["cpu_ratio"] = .double((ours.cpuMicrosecondsPerRequest / theirCPU * 1000).rounded() / 1000)
        }
        return .object(object)
    }
}

/// The notifications a bench sends: distinct device tokens cycled, one payload, a fresh apns-id each.
struct BenchWorkload: Sendable {
    let tokens: [DeviceToken]
    let template: APNsRequest
    let payload: [UInt8]
    /// The headers h2load sends: ours, with a same-length stand-in for the provider token.
    let h2loadHeaders: [String]

    var payloadByteCount: Int { payload.count }

    init(topic: String, payloadBytes: Int, distinctTokens: Int = 10_000) throws {
        var generator = SystemRandomNumberGenerator()
        tokens = try (0..<distinctTokens).map { _ in
            var bytes: [UInt8] = []
            for _ in 0..<4 { withUnsafeBytes(of: generator.next() as UInt64) { bytes += $0 } }
            return try DeviceToken(bytes: bytes)
        }
        let skeleton: JSONValue = ["aps": ["alert": ["title": "Bench", "body": "A notification from the bench"]],
                                   "pad": ""]
        let padding = max(0, payloadBytes - skeleton.compactByteCount)
        let payloadValue: JSONValue = ["aps": ["alert": ["title": "Bench", "body": "A notification from the bench"]],
                                       "pad": .string(String(repeating: "x", count: padding))]
        payload = payloadValue.compactBytes
        template = APNsRequest(deviceToken: tokens[0], environment: .production, topic: topic, pushType: .alert,
            payload: payloadValue)
        let sample = template.wire(authorization: String(repeating: "j", count: Self.jwtLength))
        h2loadHeaders = sample.headers.map { "\($0.name): \($0.value)" }
    }

    /// An ES256 JWT with a 10-character kid and iss is 4 + 1 + ~75 + 1 + 86 characters; the stand-in
    /// matches that so HPACK sees the same sizes.
    static let jwtLength = 166

    /// For the transport layer: the parts of the wire request that stay fixed (all but path and apns-id).
    struct TransportTemplate {
        var method: String
        var authority: String
        var headers: [HTTP2Header]
        var body: [UInt8]
    }

    private(set) var transportTemplate: TransportTemplate?

    mutating func prepareTransportRequests(authorization: String?, authority: String) {
        let wire = template.wire(authorization: authorization)
        transportTemplate = TransportTemplate(
            method: wire.method, authority: authority,
            headers: wire.headers.map { HTTP2Header($0.name, $0.value, isIndexable: $0.name != "apns-id") },
            body: wire.body)
    }

    func transportRequest(_ index: Int, template: TransportTemplate) -> HTTP2Request {
        // Built whole, as a caller of the transport would: setting fields of a made request repacks it.
        var headers = template.headers
        if let last = headers.indices.last, headers[last].name == "apns-id" {
            headers[last].value = APNsID.random().string
        }
        var request = HTTP2Request(method: template.method, scheme: "https", authority: template.authority,
            path: "/3/device/" + tokens[index % tokens.count].hex, headers: headers, body: template.body)
        request.isPathIndexable = false
        return request
    }

    func request(_ index: Int) -> APNsRequest {
        var request = template
        request.deviceToken = tokens[index % tokens.count]
        request.apnsID = .random()
        return request
    }
}

/// Hands out notification numbers to the senders.
final class BenchCounter: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}

/// Samples the resident set size every 10% of the run, from the sender that completes that notification.
final class RSSSampler: Sendable {
    private let total: Int
    private let done = Atomic<Int>(0)
    private let samples = Mutex<[(Int, Int)]>([])

    init(total: Int) { self.total = total }

    func completed() {
        let finished = done.wrappingAdd(1, ordering: .relaxed).newValue
        let step = max(1, total / 10)
        if finished % step == 0 || finished == total {
            let percent = Int((Double(finished) / Double(total) * 100).rounded())
            let rss = ProcessReadings.currentRSSKiB()
            samples.withLock { $0.append((percent, rss)) }
        }
    }

    func stop() {}

    var checkpoints: [(Int, Int)] {
        samples.withLock { samples in
            var seen = Set<Int>()
            return samples.sorted { $0.0 < $1.0 }.filter { seen.insert($0.0).inserted }
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
