// The logging front end that components receive as a parameter: a shared LogWriter plus context fields.

import APNs
public import JSON

/// Writes structured log lines through a shared `LogWriter`, adding this logger's context fields.
///
/// Components take a `Logger` as a parameter and derive their own with `with(_:)`
/// (`logger.with(["component": "consumer"])`); they never build a writer.
/// The message and fields are built only when the level is enabled. Use `rateLimitKey` for a message
/// that carries changing details (`"connect failed: \(address)"` → key `"connect failed"`), so repeats
/// are recognised as one.
///
/// - Important: Thread-safe (a value type over a thread-safe writer). Never put secrets into fields on
///   purpose; redaction is a safety net (see `LogRedaction`), not a licence.
public struct Logger: Sendable {
    public let writer: LogWriter
    /// Fields added to every line of this logger, already redacted (once, here, rather than on every line);
    /// a line's own fields win on a clash.
    public private(set) var context: JSONObject

    public init(writer: LogWriter, context: JSONObject = [:]) {
        self.writer = writer
        self.context = LogRedaction.redact(context)
    }

    /// A logger with `fields` added to the context.
    public func with(_ fields: JSONObject) -> Logger {
        var copy = self
        for member in LogRedaction.redact(fields) { copy.context[member.key] = member.value }
        return copy
    }

    /// Whether lines at `level` are written; check it before preparing expensive fields.
    public func isEnabled(_ level: LogLevel) -> Bool { level >= writer.level }

    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:],
        rateLimitKey: String? = nil
    ) {
        guard isEnabled(level) else { return }
        writer.emit(level, message: message(), fields: fields(), redactedContext: context, rateLimitKey: rateLimitKey)
    }

    public func trace(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:]) {
        log(.trace, message(), fields())
    }

    public func debug(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:]) {
        log(.debug, message(), fields())
    }

    public func info(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:]) {
        log(.info, message(), fields())
    }

    public func notice(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:]) {
        log(.notice, message(), fields())
    }

    public func warning(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:],
        rateLimitKey: String? = nil
    ) {
        log(.warning, message(), fields(), rateLimitKey: rateLimitKey)
    }

    public func error(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:],
        rateLimitKey: String? = nil
    ) {
        log(.error, message(), fields(), rateLimitKey: rateLimitKey)
    }

    public func critical(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> JSONObject = [:],
        rateLimitKey: String? = nil
    ) {
        log(.critical, message(), fields(), rateLimitKey: rateLimitKey)
    }
}
