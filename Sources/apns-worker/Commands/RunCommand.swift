// `apns-worker run --config worker.yaml`: the production worker.

import APNs
import Foundation
import JSON
import PushRules
import Worker

#if canImport(Glibc)
import Glibc
#endif

struct RunCommand: Command {
    static let name = "run"
    static let summary = "Run the worker: consume events, send pushes, publish outcomes (production)."
    static let discussion = """
        Reads worker.yaml (schemas/worker-config.schema.json); every key can be overridden by an
        environment variable APNS_WORKER_<KEY>__<KEY>, e.g. APNS_WORKER_KAFKA__GROUP=push. Secrets come
        from files named in the config, never from the command line. SIGTERM or SIGINT drains in-flight
        work for up to shutdown.drain_timeout, commits what finished and exits within 3 s more, whatever
        Kafka is doing: 0 after an orderly shutdown, 1 with a log line saying why otherwise. What was not
        finished stays uncommitted for the group's next owner. SIGHUP reloads the rules file.

        example: apns-worker run --config /etc/apns-worker/config/worker.yaml
        """
    static let options: [OptionSpec] = [
        .value("--config", "FILE", "The worker configuration (YAML)."),
        .flag("--check", "Load and check the configuration, rules and credentials, then exit."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        let path = try arguments.required("--config")
        let (configuration, overrides) = try loadOrExplain(path)
        let writer = LogWriter(configuration: .init(level: LogLevel(name: configuration.logLevel) ?? .info))
        defer { writer.close() }
        let logger = Logger(writer: writer, context: ["service": "apns-worker"])
        if !overrides.isEmpty {
            logger.info(
                "configuration keys overridden by the environment",
                [
                    "variables": .array(overrides.map(JSONValue.string))
                ])
        }
        let outcome = await WorkerProcess.run(
            configuration: configuration, logger: logger, checkOnly: arguments.has("--check"), configurationFile: path)
        return outcome
    }

    static func loadOrExplain(_ path: String) throws -> (WorkerConfiguration, [String]) {
        do {
            return try ConfigurationLoader.load(path: path, environment: ProcessInfo.processInfo.environment)
        } catch {
            standardError("apns-worker run: \(path): \(error)")
            throw ExitCode(1)
        }
    }
}
