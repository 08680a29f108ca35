// Where each key of a loaded worker.yaml came from: its file:line:column, or the environment variable
// that set it. Problems found after decoding (a credential that does not load, a Kafka property
// librdkafka refuses) are placed with it, so every configuration problem has the same form.

import PushRules

/// The positions of a configuration's keys and the variables that overrode some of them.
public struct ConfigurationSource: Sendable {
    /// The configuration file as given (`--config`).
    public let file: String
    private let document: YAMLDocument?
    /// Each override's variable and the key path it set, in the order they were applied.
    private let overrides: [(variable: String, path: String)]

    init(file: String, document: YAMLDocument?, overrides: [String]) {
        self.file = file
        self.document = document
        self.overrides = overrides.compactMap { name in
            EnvironmentOverrides.configurationPath(of: name).map { (name, $0.joined(separator: ".")) }
        }
    }

    /// `environment variable NAME` when a variable set the key at `path` (or a key enclosing it);
    /// otherwise `file:line:column` of that key, or of its nearest enclosing key in the file.
    public func location(of path: String) -> String {
        if let override = overrides.first(where: { Self.path($0.path, covers: path) }) {
            return "environment variable \(override.variable)"
        }
        guard let position = document?.position(of: path) else { return file }
        return "\(file):\(position)"
    }

    /// `error` with every problem that has no location yet placed at its key path.
    public func locate(_ error: ConfigurationError) -> ConfigurationError {
        var located = error
        for index in located.problems.indices where located.problems[index].location == nil {
            located.problems[index].location = location(of: located.problems[index].path)
        }
        return located
    }

    /// Whether a variable that set the key at `variablePath` set the key at `path`, or one inside it.
    static func path(_ variablePath: String, covers path: String) -> Bool {
        path == variablePath || path.hasPrefix(variablePath + ".") || path.hasPrefix(variablePath + "[")
    }
}
