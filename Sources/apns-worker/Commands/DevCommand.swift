// `apns-worker dev`: the main job on its embedded default, no outside services needed.

import Foundation
import Worker
import WorkerDev

#if canImport(Glibc)
import Glibc
#endif

struct DevCommand: Command {
    static let name = "dev"
    static let summary = "Run everything in one process (mock Kafka, APNs simulator, worker, sample events)."
    static let discussion = """
        Starts librdkafka's mock cluster, the APNs simulator (some unregistered tokens, some 503s),
        the worker with the example rules (examples/rules.yaml, embedded), and a generator of sample
        events; prints each outcome as Kafka acknowledges it and a summary at the end.

        examples: apns-worker dev                 # 300 events, then a summary
                  apns-worker dev -n 5000 --rate 0 --quiet
                  apns-worker dev --follow        # until Ctrl-C
        """
    static let options: [OptionSpec] = [
        .value("-n", "N", "Events to generate before stopping. Default: 300."),
        .value("--events", "N", "Same as -n."),
        .flag("--follow", "Keep generating events until Ctrl-C."),
        .value("--rate", "PER_SECOND", "Events generated per second; 0 for as fast as possible. Default: 100."),
        .value("--failure-rate", "R", "Share of APNs requests the simulator answers 503, 0 to 1. Default: 0.05."),
        .value("--metrics-listen", "HOST:PORT", "Where /metrics, /healthz and /readyz listen. Default: 127.0.0.1:0."),
        .flag("--quiet", "Print only the summary, not every outcome."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        var options = DevEnvironment.Options()
        if let count = try arguments.integer("-n", range: 1...10_000_000)
            ?? arguments.integer("--events", range: 1...10_000_000)
        {
            options.events = count
        }
        options.follow = arguments.has("--follow")
        if let rate = arguments.value("--rate") {
            guard let value = Double(rate), value >= 0 else {
                throw UsageError(message: "--rate needs a number of events per second (0 for no limit), got '\(rate)'")
            }
            options.rate = value == 0 ? nil : value
        }
        if let rate = arguments.value("--failure-rate") {
            guard let value = Double(rate), (0...1).contains(value) else {
                throw UsageError(message: "--failure-rate needs a number from 0 to 1, got '\(rate)'")
            }
            options.failureRate = value
        }
        options.metricsListen = arguments.value("--metrics-listen") ?? options.metricsListen
        options.printOutcomes = !arguments.has("--quiet")
        return await DevEnvironment.run(options) { line in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
