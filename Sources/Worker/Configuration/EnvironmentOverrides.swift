// Every key of worker.yaml can be overridden by an environment variable, so one ConfigMap serves
// every deployment and Helm can set per-environment values:
//   APNS_WORKER_<KEY>__<KEY>... e.g. APNS_WORKER_KAFKA__BROKERS, APNS_WORKER_APPS__0__CREDENTIAL__KEY_ID.
// Inside a librdkafka property map, '_' stands for '.' (APNS_WORKER_KAFKA__PROPERTIES__SASL_MECHANISM
// sets sasl.mechanism), since librdkafka property names have dots and no underscores.

import APNs
public import JSON

public enum EnvironmentOverrides {
    public static let prefix = "APNS_WORKER_"
    static let propertyMaps: Set<String> = ["properties", "property_files"]
    /// The top-level keys of worker.yaml.
    static let sections: Set<String> = [
        "kafka", "credentials", "apps", "apns", "pipeline", "retry", "shutdown", "rules", "metrics", "log",
    ]

    /// The lowercased keys an `APNS_WORKER_A__B` variable names (`["a", "b"]`), empty ones kept so that a
    /// malformed name stays recognisable as such; nil for a variable without the prefix.
    static func keys(of name: String) -> [String]? {
        guard name.hasPrefix(prefix) else { return nil }
        return name.dropFirst(prefix.count).split(separator: "__", omittingEmptySubsequences: false)
            .map { $0.lowercased() }
    }

    /// The key path an override sets (`["kafka", "properties", "sasl.password"]` for
    /// APNS_WORKER_KAFKA__PROPERTIES__SASL_PASSWORD), or nil when the variable is no override: applying a
    /// variable and blaming a problem on it use this one answer.
    static func configurationPath(of name: String) -> [String]? {
        guard var path = keys(of: name) else { return nil }
        // Only variables naming a configuration section count: Kubernetes also injects
        // APNS_WORKER_METRICS_PORT and friends for a Service named apns-worker-metrics.
        guard !path.isEmpty, !path.contains(where: \.isEmpty), sections.contains(path[0]) else { return nil }
        if path.count >= 3, path[0] == "kafka", propertyMaps.contains(path[1]) {
            path[2] = path[2...].joined(separator: "_").replacingUnderscores(with: ".")
            path = Array(path[0...2])
        }
        return path
    }

    /// Applies every `APNS_WORKER_...` variable of `environment` to `document`. A value that parses
    /// as JSON (a number, a boolean, a list) takes that type; anything else is a string.
    /// Returns the names of the variables applied, for the start-up log (never their values).
    public static func apply(_ environment: [String: String], to document: inout JSONValue) -> [String] {
        var applied: [String] = []
        for (name, rawValue) in environment.sorted(by: { $0.key < $1.key }) {
            guard let path = configurationPath(of: name) else { continue }
            let value =
                (try? JSONValue(parsing: rawValue)).flatMap { parsed -> JSONValue? in
                    if case .object = parsed { return nil }
                    return parsed
                } ?? .string(rawValue)
            set(value, at: path[...], in: &document)
            applied.append(name)
        }
        return applied
    }

    /// The `APNS_WORKER_...__...` variables whose first key names no configuration section: an override
    /// meant for a key that does not exist, such as APNS_WORKER_KAFAK__GROUP. A `__` marks an override;
    /// Kubernetes' service-link variables (APNS_WORKER_METRICS_PORT) never have one, since service names
    /// cannot hold an underscore.
    public static func unmatched(_ environment: [String: String]) -> [ConfigurationProblem] {
        environment.keys.sorted().compactMap { name in
            guard let keys = keys(of: name), keys.count > 1, !sections.contains(keys[0]) else { return nil }
            let section = keys[0]
            return ConfigurationProblem(
                path: "",
                message: "overrides '\(keys.joined(separator: "."))', but '\(section)' is "
                    + "no section of the configuration\(Spelling.suggestion(for: section, among: sections)); "
                    + "the sections are " + sections.sorted().joined(separator: ", "),
                location: "environment variable \(name)")
        }
    }

    static func set(_ value: JSONValue, at path: ArraySlice<String>, in node: inout JSONValue) {
        guard let key = path.first else {
            node = value
            return
        }
        let rest = path.dropFirst()
        if let index = Int(key) {
            var array = node.arrayValue ?? []
            while array.count <= index { array.append(.object(JSONObject())) }
            set(value, at: rest, in: &array[index])
            node = .array(array)
        } else {
            var object = node.objectValue ?? JSONObject()
            var child = object[key] ?? .null
            set(value, at: rest, in: &child)
            object[key] = child
            node = .object(object)
        }
    }
}

extension String {
    fileprivate func replacingUnderscores(with replacement: Character) -> String {
        String(map { $0 == "_" ? replacement : $0 })
    }
}
