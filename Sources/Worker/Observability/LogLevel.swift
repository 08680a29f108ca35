// Log severity, ordered, with the names used in config and in each JSON line.

/// How severe a log line is. Lines below the configured level are not built at all.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case trace, debug, info, notice, warning, error, critical

    /// `trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`: the config value and the `level` field.
    public var name: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        case .critical: "critical"
        }
    }

    public var description: String { name }

    /// Parses a level name, case-insensitively; `warn` is accepted for `warning`.
    public init?(name: String) {
        let lowered = name.lowercased()
        if lowered == "warn" {
            self = .warning
            return
        }
        guard let level = Self.allCases.first(where: { $0.name == lowered }) else { return nil }
        self = level
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}
