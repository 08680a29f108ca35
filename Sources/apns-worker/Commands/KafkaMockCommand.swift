// `apns-worker kafka-mock`: librdkafka's mock Kafka cluster as a process of its own, for tests that
// kill the worker and for trying `run` locally. Prints its bootstrap servers, runs until a signal;
// optionally takes brokers down and up on commands from standard input (the same cluster, same ports).

import Foundation
import Kafka
import Platform

struct KafkaMockCommand: Command {
    static let name = "kafka-mock"
    static let summary = "Run librdkafka's mock Kafka cluster on loopback until SIGINT or SIGTERM."
    static let discussion = """
        Starts an in-process mock cluster (brokers on 127.0.0.1, ports chosen by the OS), creates the
        topics, and prints one line to standard output:
          bootstrap.servers=127.0.0.1:PORT,127.0.0.1:PORT,...
        With --port P it also listens on 127.0.0.1:P, forwarding each connection to broker 1, and prints
        bootstrap.servers=127.0.0.1:P: a fixed address for a worker.yaml. (librdkafka's mock brokers pick
        their own ports; clients bootstrap through P and then reach them where their metadata says.)
        It supports producing (also idempotent) and consumer groups with committed offsets. Offsets and
        records live in memory and are gone when it stops.

        With --control-stdin it reads commands from standard input, one a line, and answers each with
        one line on standard output:
          down [ID ...]   take brokers down (default: all): connections drop, new ones are refused
          up [ID ...]     let them accept connections again
          delay MS [ID ...]
                          answer every request MS milliseconds late (0: at once), as a broker behind a
                          path that went dark does: connections stay up, requests are applied, answers wait
        answered "brokers down: 1,2,3" / "brokers up: 1,2,3" / "brokers delay 120000: 1,2,3", or
        "error: ..." for a bad command.
        Topics, records and committed offsets survive a down and up.

        example: apns-worker kafka-mock --brokers 3 --topics push.requests:12,push.outcomes:6
                 apns-worker kafka-mock --brokers 1 --port 39092 --topics push.requests:4
        """
    static let options: [OptionSpec] = [
        .value("--brokers", "N", "Number of brokers, 1 to 64. Default: 3."),
        .value("--topics", "NAME:PARTITIONS,...", "Topics to create, e.g. push.requests:12,push.outcomes:6."),
        .value("--replication-factor", "N", "Replicas per partition, 1 to the broker count. Default: 1."),
        .value("--port", "PORT", "Also accept bootstrap connections on 127.0.0.1:PORT (1 to 65535)."),
        .flag(
            "--control-stdin",
            "Take brokers down and up, or delay their answers, on commands from standard input (see above)."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let brokers = try arguments.integer("--brokers", default: 3, range: 1...64)!
        let replication = try arguments.integer("--replication-factor", default: 1, range: 1...brokers)!
        let topics = try parseTopics(arguments.value("--topics") ?? "")
        let port = try arguments.integer("--port", default: nil, range: 1...65535)

        // From before the bootstrap line is printed: whoever reads it may signal at once.
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM])
        let cluster = try MockKafkaCluster(brokers: brokers)
        for (topic, partitions) in topics {
            try cluster.createTopic(topic, partitions: partitions, replicationFactor: replication)
        }
        var bootstrap = cluster.bootstrapServers
        if let port {
            guard let first = bootstrap.split(separator: ",").first, let colon = first.lastIndex(of: ":"),
                let brokerPort = UInt16(first[first.index(after: colon)...])
            else {
                standardError("apns-worker kafka-mock: cannot tell broker 1's port from '\(bootstrap)'")
                return 1
            }
            do {
                try KafkaMockPortForwarder.start(port: UInt16(port), targetPort: brokerPort)
            } catch {
                standardError("apns-worker kafka-mock: \(error)")
                await cluster.stop()
                return 1
            }
            bootstrap = "127.0.0.1:\(port)"
        }
        FileHandle.standardOutput.write(Data("bootstrap.servers=\(bootstrap)\n".utf8))
        let summary = topics.map { "\($0.name) (\($0.partitions) partitions)" }.joined(separator: ", ")
        standardError(
            "kafka-mock: \(brokers) brokers; topics: \(summary.isEmpty ? "none" : summary); "
                + "stop with Ctrl-C or SIGTERM")

        if arguments.has("--control-stdin") { BrokerControl.start(cluster: cluster) }

        let signal = await signals.waitForFirst()
        signals.cancel()
        await cluster.stop()
        standardError("kafka-mock: stopped on \(signal == SIGINT ? "SIGINT" : "SIGTERM")")
        return 0
    }

    /// Parses comma-separated `name:partitions` entries.
    static func parseTopics(_ list: String) throws -> [(name: String, partitions: Int)] {
        var topics: [(name: String, partitions: Int)] = []
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        for entry in list.split(separator: ",") {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let partitions = Int(parts[1]) else {
                throw UsageError(message: "--topics entry '\(entry)' must be NAME:PARTITIONS, e.g. push.requests:12")
            }
            let name = String(parts[0])
            guard !name.isEmpty, name.count <= 249, name.allSatisfy(allowed.contains) else {
                throw UsageError(
                    message: "--topics entry '\(entry)': a topic name is 1 to 249 characters "
                        + "of a-z, A-Z, 0-9, '.', '_' and '-'")
            }
            guard (1...10_000).contains(partitions) else {
                throw UsageError(
                    message: "--topics entry '\(entry)': partitions must be 1 to 10000, got \(partitions)"
                )
            }
            guard !topics.contains(where: { $0.name == name }) else {
                throw UsageError(message: "--topics names '\(name)' more than once")
            }
            topics.append((name, partitions))
        }
        return topics
    }
}

/// Reads `down [ID ...]`, `up [ID ...]` and `delay MS [ID ...]` commands from standard input on a thread
/// of its own (reading blocks), applies them to the cluster and answers each on standard output.
private enum BrokerControl {
    static func start(cluster: MockKafkaCluster) {
        do {
            try NamedThread.detached(name: "kafka-mock-control") {
                while let line = readLine() {
                    let answer = apply(line, to: cluster)
                    FileHandle.standardOutput.write(Data((answer + "\n").utf8))
                }
            }
        } catch {
            fatalError("\(error): --control-stdin needs a thread to read commands on")
        }
    }

    static func apply(_ line: String, to cluster: MockKafkaCluster) -> String {
        var words = line.split(separator: " ").map(String.init)
        guard let command = words.first, ["down", "up", "delay"].contains(command) else {
            return "error: unknown command '\(line)'; use 'down [ID ...]', 'up [ID ...]' or 'delay MS [ID ...]'"
        }
        words.removeFirst()
        var delay: Int?
        if command == "delay" {
            guard let milliseconds = words.first.flatMap({ Int($0) }), (0...3_600_000).contains(milliseconds) else {
                return "error: 'delay' needs the milliseconds first, 0 to 3600000: 'delay MS [ID ...]'"
            }
            delay = milliseconds
            words.removeFirst()
        }
        var ids: [Int32] = []
        for word in words {
            guard let id = Int32(word), (1...Int32(cluster.brokerCount)).contains(id) else {
                return "error: '\(word)' is not a broker id; broker ids are 1...\(cluster.brokerCount)"
            }
            ids.append(id)
        }
        if ids.isEmpty { ids = Array(1...Int32(cluster.brokerCount)) }
        do {
            for id in ids {
                if let delay {
                    try cluster.setBrokerAnswerDelay(id, .milliseconds(delay))
                } else if command == "down" {
                    try cluster.setBrokerDown(id)
                } else {
                    try cluster.setBrokerUp(id)
                }
            }
        } catch {
            return "error: \(error)"
        }
        let what = delay.map { "delay \($0)" } ?? command
        return "brokers \(what): " + ids.map(String.init).joined(separator: ",")
    }
}
