// Reads worker.yaml: YAML → environment overrides → typed configuration, with every problem reported
// at its file:line:column and what would be right. Start-up stops on any problem.

import APNs
import Foundation
import PushRules

public enum ConfigurationLoader {
    /// Loads `path`, applying `APNS_WORKER_...` variables from `environment`.
    /// - Returns: the configuration and the names of the variables that overrode a key.
    public static func load(path: String, environment: [String: String])
        throws(ConfigurationError) -> (WorkerConfiguration, overrides: [String])
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
        throws(ConfigurationError) -> (WorkerConfiguration, overrides: [String])
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
        // An override that matches nothing would otherwise leave its key at the file's value, silently.
        let unmatched = EnvironmentOverrides.unmatched(environment)
        let configuration: WorkerConfiguration
        do throws(ConfigurationError) {
            configuration = try WorkerConfiguration(decoding: value, checkingFiles: true)
        } catch {
            var located = error
            for index in located.problems.indices {
                let path = located.problems[index].path
                if let variable = overrides.first(where: { Self.variable($0, covers: path) }) {
                    located.problems[index].location = "environment variable \(variable)"
                } else if let position = document.position(of: path) {
                    located.problems[index].location = "\(file):\(position)"
                } else {
                    located.problems[index].location = file
                }
            }
            located.problems += unmatched
            throw located
        }
        guard unmatched.isEmpty else { throw ConfigurationError(problems: unmatched) }
        return (configuration, overrides)
    }

    /// Whether `APNS_WORKER_A__B` set the key at `a.b` (or a key inside it).
    static func variable(_ name: String, covers path: String) -> Bool {
        let variablePath = (EnvironmentOverrides.keys(of: name) ?? []).joined(separator: ".")
        return path == variablePath || path.hasPrefix(variablePath + ".") || path.hasPrefix(variablePath + "[")
    }
}
