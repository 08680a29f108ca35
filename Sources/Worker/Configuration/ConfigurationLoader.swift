// Reads worker.yaml: YAML → environment overrides → typed configuration, with every problem reported
// at its file:line:column and what would be right. Start-up stops on any problem.

import APNs
import Foundation
import PushRules

/// A loaded configuration, the variables that overrode its keys, and where each key came from.
public struct LoadedConfiguration: Sendable {
    public var configuration: WorkerConfiguration
    /// The names of the variables that overrode a key (never their values).
    public var overrides: [String]
    /// Places later problems (credentials, Kafka properties) at their key's file:line:column.
    public var source: ConfigurationSource
}

public enum ConfigurationLoader {
    /// Loads `path`, applying `APNS_WORKER_...` variables from `environment`.
    public static func load(path: String, environment: [String: String])
        throws(ConfigurationError) -> LoadedConfiguration
    {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason =
                FileManager.default.fileExists(atPath: path)
                ? "cannot be read (check its permissions)" : "does not exist (give the path with --config)"
            throw ConfigurationError(problems: [
                ConfigurationProblem(path: "", message: "the file \(reason)", location: path)
            ])
        }
        return try load(bytes: Array(data), file: path, environment: environment)
    }

    public static func load(bytes: [UInt8], file: String, environment: [String: String])
        throws(ConfigurationError) -> LoadedConfiguration
    {
        let document: YAMLDocument
        do {
            document = try YAMLDocument(bytes: bytes)
        } catch {
            throw ConfigurationError(problems: [
                ConfigurationProblem(
                    path: "", message: "not valid YAML: \(error.message)", location: "\(file):\(error.position)")
            ])
        }
        var value = document.value
        let overrides = EnvironmentOverrides.apply(environment, to: &value)
        let source = ConfigurationSource(file: file, document: document, overrides: overrides)
        // An override that matches nothing would otherwise leave its key at the file's value, silently.
        let unmatched = EnvironmentOverrides.unmatched(environment)
        let configuration: WorkerConfiguration
        do throws(ConfigurationError) {
            configuration = try WorkerConfiguration(decoding: value, checkingFiles: true)
        } catch {
            var located = source.locate(error)
            located.problems += unmatched
            throw located
        }
        guard unmatched.isEmpty else { throw ConfigurationError(problems: unmatched) }
        return LoadedConfiguration(configuration: configuration, overrides: overrides, source: source)
    }
}
