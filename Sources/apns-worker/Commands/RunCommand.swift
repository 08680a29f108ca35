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
        let environment = ProcessInfo.processInfo.environment
        let loaded = try loadOrExplain(path, environment: environment)
        let configuration = loaded.configuration
        let credentials = try checkRulesAndCredentials(loaded, environment: environment)
        let writer = LogWriter(configuration: .init(level: LogLevel(name: configuration.logLevel) ?? .info))
        defer { writer.close() }
        let logger = Logger(writer: writer, context: ["service": "apns-worker"])
        if !loaded.overrides.isEmpty {
            logger.info(
                "configuration keys overridden by the environment",
                [
                    "variables": .array(loaded.overrides.map(JSONValue.string))
                ])
        }
        let source = loaded.source
        let outcome = await WorkerProcess.run(
            configuration: configuration, logger: logger, checkOnly: arguments.has("--check"),
            preloadedCredentials: credentials,
            configurationProblems: { error in
                writer.flush()
                explain(source.locate(error))
            })
        return outcome
    }

    static func loadOrExplain(_ path: String, environment: [String: String]) throws -> LoadedConfiguration {
        do {
            return try ConfigurationLoader.load(path: path, environment: environment)
        } catch {
            explain(error)
            throw ExitCode(1)
        }
    }

    /// Loads the rules and every credential before anything starts, so that all their problems are
    /// reported together, each where it is; returns the loaded credentials.
    static func checkRulesAndCredentials(_ loaded: LoadedConfiguration, environment: [String: String]) throws
        -> [String: LoadedCredential]
    {
        var problems: [ConfigurationProblem] = []
        do throws(RulesLoadError) {
            _ = try RuleSet.load(contentsOf: loaded.configuration.rulesFile)
        } catch {
            problems += ConfigurationError(rules: error).problems
        }
        do throws(ConfigurationError) {
            let credentials = try CredentialClients.load(loaded.configuration, environment: environment)
            if problems.isEmpty { return credentials }
        } catch {
            problems += loaded.source.locate(error).problems
        }
        explain(ConfigurationError(problems: problems))
        throw ExitCode(1)
    }

    /// Prints each problem on its own line on standard error, `file:line:column: what is wrong; what
    /// would be right` (or the variable that set the key), then a line saying the worker does not start.
    static func explain(_ error: ConfigurationError) {
        var lines = error.problems.map { LogRedaction.scrub($0.description) }
        let count = error.problems.count == 1 ? "1 problem" : "\(error.problems.count) problems"
        lines.append("apns-worker run: \(count); the worker does not start")
        standardError(lines.joined(separator: "\n"))
    }
}
