// The options of `bench send`, read and checked in the order the command always has, so that the same
// bad option gives the same error.

import APNs
import HTTP2

/// The checked options of one `bench send` run.
struct BenchSendSettings {
    var count: Int
    var connections: Int
    var streams: Int
    var loopThreads: Int
    var payloadBytes: Int
    var serverThreads: Int
    var topic: String
    /// `client`, `transport` or `render`.
    var layer: String
    var attempts: Int
    var policy: RetryPolicy
    /// `loop` or `default`.
    var executorChoice: String

    /// Senders in all: every stream of every connection.
    var concurrency: Int { connections * streams }

    init(_ arguments: ParsedArguments) throws {
        count = try arguments.integer("--count", default: 100_000, range: 1...100_000_000)!
        connections = try arguments.integer("--connections", default: 1, range: 1...64)!
        streams = try arguments.integer("--streams", default: 100, range: 1...10_000)!
        loopThreads = try arguments.integer("--loop-threads", default: 1, range: 1...16)!
        payloadBytes = try arguments.integer("--payload-bytes", default: 200, range: 40...4096)!
        serverThreads = try arguments.integer("--server-threads", default: 1, range: 1...64)!
        topic = arguments.value("--topic") ?? "com.example.bench"
        layer = arguments.value("--layer") ?? "client"
        attempts = try arguments.integer("--attempts", default: 1, range: 1...20)!
        policy =
            attempts == 1
            ? RetryPolicy.never
            : RetryPolicy(
                maximumAttempts: attempts,
                maximumTotalTime: .seconds(60),
                backoff: ExponentialBackoff(initial: .milliseconds(10), maximum: .milliseconds(500)))
        executorChoice = arguments.value("--executor") ?? "loop"
        guard executorChoice == "loop" || executorChoice == "default" else {
            throw UsageError(message: "--executor must be loop or default, got '\(executorChoice)'")
        }
        guard layer == "client" || layer == "transport" || layer == "render" else {
            throw UsageError(message: "--layer must be client, transport or render, got '\(layer)'")
        }
    }

    /// `--warm-up`, read only once the run is set up (as it always was): by default
    /// min(count, max(2000, 4 × connections × streams)).
    func warmUpCount(_ arguments: ParsedArguments) throws -> Int {
        try arguments.integer("--warm-up", default: min(count, max(2_000, concurrency * 4)), range: 0...10_000_000)!
    }
}
