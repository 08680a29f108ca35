// The small command-line parser this project needs, in the spirit of swift-argument-parser: each
// command declares its options beside their help; unknown flags and missing values are errors.

import APNs
import JSON

/// One option a command accepts.
struct OptionSpec: Sendable {
    enum Kind: Sendable {
        /// `--name VALUE` (or `--name=VALUE`).
        case value(placeholder: String)
        /// `--name VALUE`, may be given several times.
        case repeatedValue(placeholder: String)
        /// `--name` alone.
        case flag
    }
    var name: String
    var kind: Kind
    var help: String

    static func value(_ name: String, _ placeholder: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .value(placeholder: placeholder), help: help)
    }
    static func repeated(_ name: String, _ placeholder: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .repeatedValue(placeholder: placeholder), help: help)
    }
    static func flag(_ name: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .flag, help: help)
    }
}

/// A usage error: what was wrong with the command line and what would be right. Exit code 2.
struct UsageError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A command failed in a way its output already explains; carries the exit code.
struct ExitCode: Error {
    var code: Int32
    init(_ code: Int32) { self.code = code }
}

/// The options a command was given, checked against its `OptionSpec`s.
struct ParsedArguments {
    private(set) var values: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []

    init(_ arguments: [String], specs: [OptionSpec], allowsPositionals: Bool = false) throws {
        let byName = Dictionary(specs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") || (argument.count == 2 && argument.hasPrefix("-")) else {
                if allowsPositionals {
                    positionals.append(argument)
                    continue
                }
                throw UsageError(message: "unexpected argument '\(argument)'; options start with --")
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let spec = byName[name] else {
                let suggestion =
                    Spelling.closest(to: name, among: specs.map(\.name))
                    .map { " (did you mean \($0)?)" } ?? ""
                throw UsageError(message: "unknown option '\(name)'\(suggestion)")
            }
            switch spec.kind {
            case .flag:
                if inlineValue != nil { throw UsageError(message: "option '\(name)' takes no value") }
                flags.insert(name)
            case .value(let placeholder), .repeatedValue(let placeholder):
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                        throw UsageError(message: "option '\(name)' needs a value: \(name) \(placeholder)")
                    }
                    value = arguments[index]
                    index += 1
                }
                if case .value = spec.kind, values[name] != nil {
                    throw UsageError(message: "option '\(name)' was given more than once")
                }
                values[name, default: []].append(value)
            }
        }
    }

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }

    func required(_ name: String) throws -> String {
        guard let value = value(name) else { throw UsageError(message: "missing required option \(name)") }
        return value
    }

    func integer(_ name: String, default defaultValue: Int? = nil, range: ClosedRange<Int>? = nil) throws -> Int? {
        guard let text = value(name) else { return defaultValue }
        guard let number = Int(text) else {
            throw UsageError(message: "option \(name) needs a whole number, got '\(text)'")
        }
        if let range, !range.contains(number) {
            throw UsageError(
                message: "option \(name) must be between \(range.lowerBound) and \(range.upperBound), got \(number)")
        }
        return number
    }
}

/// A subcommand of `apns-worker`. `name` may have several words ("rules check").
protocol Command: Sendable {
    static var name: String { get }
    static var summary: String { get }
    /// Text printed by `--help` after the usage line: what the command does, an example.
    static var discussion: String { get }
    static var options: [OptionSpec] { get }
    /// Runs the command; returns the process exit code.
    static func run(_ arguments: ParsedArguments) async throws -> Int32
}

extension Command {
    static var discussion: String { "" }

    static var helpText: String {
        var lines = ["usage: apns-worker \(name)" + (options.isEmpty ? "" : " [options]"), "", summary]
        if !discussion.isEmpty { lines += ["", discussion] }
        if !options.isEmpty {
            lines += ["", "options:"]
            for spec in options + [.flag("--help", "Show this help.")] {
                var left = "  " + spec.name
                switch spec.kind {
                case .value(let placeholder): left += " " + placeholder
                case .repeatedValue(let placeholder): left += " " + placeholder + " (repeatable)"
                case .flag: break
                }
                let pad = max(1, 34 - left.count)
                lines.append(left + String(repeating: " ", count: pad) + spec.help)
            }
        }
        return lines.joined(separator: "\n")
    }
}
