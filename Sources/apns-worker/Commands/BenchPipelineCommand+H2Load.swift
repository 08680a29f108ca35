// `bench pipeline --compare-h2load`: h2load as `bench send --compare-h2load` runs it with its defaults,
// between the pipeline's phases, so that the worker's CPU per notification and h2load's per request come
// from the same minute. Two separate runs differ by as much as this machine's speed moves between them
// (docs/performance.md), which is more than the margin a CPU target is judged by.

import Foundation
import WorkerDev

extension BenchPipelineCommand {
    /// h2load with `bench send`'s default request shape (connections, streams, payload, count) against an
    /// h2o started for it, stopped again before this returns.
    static func h2loadReference() async throws -> PipelineBenchmark.ReferenceRun {
        let settings = try BenchSendSettings(ParsedArguments([], specs: BenchSendCommand.options))
        let directory = NSTemporaryDirectory() + "apns-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await H2OReferenceServer.start(
            directory: directory, threads: settings.serverThreads, maximumStreams: settings.streams)
        let interrupts = BenchSendTarget.stopOnInterrupt(pid: server.pid)
        defer {
            server.stop()
            interrupts.cancel()
        }
        let workload = try BenchSendWorkload(topic: settings.topic, payloadBytes: settings.payloadBytes)
        // One h2load run takes well under a second, and its CPU per request moved by a third from run to
        // run on this machine (3.7-5.9 µs): the median of a few runs is what the ratio is taken over.
        let setup =
            "as `bench send --compare-h2load` runs it (h2o, \(settings.connections) connection × "
            + "\(settings.streams) streams, \(workload.payloadByteCount)-byte payload)"
        var runs: [PipelineBenchmark.ReferenceRun] = []
        for _ in 0..<referenceRuns {
            let result = try await BenchSendCommand.runH2Load(
                workload: workload, endpoint: server.url, count: settings.count, connections: settings.connections,
                streams: settings.streams, directory: directory)
            guard result.failed == 0, result.succeeded == settings.count else {
                throw BenchError(
                    "h2load's reference run: \(result.succeeded) of \(settings.count) requests succeeded")
            }
            runs.append(
                PipelineBenchmark.ReferenceRun(
                    name: "h2load", setup: setup, requests: result.succeeded, cpuMicroseconds: result.cpuMicroseconds))
        }
        var median = runs.sorted { $0.cpuMicrosecondsPerRequest < $1.cpuMicrosecondsPerRequest }[runs.count / 2]
        median.microsecondsPerRequestOfEachRun = runs.map(\.cpuMicrosecondsPerRequest)
        return median
    }

    /// How many times h2load runs; the ratio uses the median run.
    static let referenceRuns = 3
}
