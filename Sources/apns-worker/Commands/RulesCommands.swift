// `apns-worker rules check | render | explain`: load a rules file and report every problem, show the
// requests an event would become, or show rule by rule why an event did or did not match.

import APNs
import Foundation
import JSON
import PushRules

/// Shared by the rules commands: loading files with errors a person can act on.
enum RulesCommandSupport {
    static let rulesOption = OptionSpec.value("--rules", "FILE", "The rules file (YAML, or JSON if it ends in .json).")
    static let eventOption = OptionSpec.value("--event", "FILE", "The event as JSON ('-' for standard input).")

    /// Loads the rules, or prints every problem and throws exit code 1.
    static func loadRules(_ arguments: ParsedArguments) throws -> RuleSet {
        let path = try arguments.required("--rules")
        do {
            return try RuleSet.load(contentsOf: path)
        } catch {
            standardError(error.description)
            throw ExitCode(1)
        }
    }

    /// Reads and parses the event, or prints where it is not JSON and throws exit code 1.
    static func loadEvent(_ arguments: ParsedArguments) throws -> JSONValue {
        let path = try arguments.required("--event")
        let data: Data?
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            data = FileManager.default.contents(atPath: path)
        }
        guard let data else {
            standardError("\(path): the event file does not exist or cannot be read")
            throw ExitCode(1)
        }
        do {
            return try JSONValue(parsing: data)
        } catch {
            standardError("\(path):\(error.line):\(error.column): the event is not valid JSON: \(error.message)")
            throw ExitCode(1)
        }
    }

    /// `--now` as UNIX seconds; the clock when absent.
    static func now(_ arguments: ParsedArguments) throws -> Int64 {
        guard let text = arguments.value("--now") else { return Int64(Date().timeIntervalSince1970) }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970) }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970) }
        throw UsageError(message: "--now needs an ISO 8601 time such as 2026-11-29T12:00:00Z, got '\(text)'")
    }
}

struct RulesCheckCommand: Command {
    static let name = "rules check"
    static let summary = "Check a rules file; print a summary, or every problem with file:line:column."
    static let discussion = """
        Exit 0 when the file is valid, 1 with one line per problem otherwise (unknown keys with the
        closest right one, bad operators, template errors, push type / priority / topic combinations
        APNs rejects).

        example:
          apns-worker rules check --rules examples/rules.yaml
        """
    static let options = [RulesCommandSupport.rulesOption]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let rules = try RulesCommandSupport.loadRules(arguments)
        print("valid: " + rules.summary)
        return 0
    }
}

struct RulesRenderCommand: Command {
    static let name = "rules render"
    static let summary = "Show what an event becomes: each request exactly as it would be sent, or why not."
    static let discussion = """
        Prints one JSON object a line per decision: for a request, its method, URL, headers
        (apns-id is fresh on every attempt) and body; for a skip or rejection, the reason and details.
        --now fixes the clock (expiration checks, events without occurred_at).

        example:
          apns-worker rules render --rules examples/rules.yaml --event event.json --now 2026-11-29T12:00:00Z
        """
    static let options = [
        RulesCommandSupport.rulesOption, RulesCommandSupport.eventOption,
        .value("--now", "TIME", "The current time, ISO 8601. Default: the clock."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let rules = try RulesCommandSupport.loadRules(arguments)
        let event = try RulesCommandSupport.loadEvent(arguments)
        let now = try RulesCommandSupport.now(arguments)
        for decision in rules.evaluate(event, now: now).decisions {
            print(decision.json().compactString)
        }
        return 0
    }
}

struct RulesExplainCommand: Command {
    static let name = "rules explain"
    static let summary = "For each rule, whether it matches an event and, condition by condition, why not."
    static let discussion = """
        example:
          apns-worker rules explain --rules examples/rules.yaml --event event.json
        """
    static let options = [RulesCommandSupport.rulesOption, RulesCommandSupport.eventOption]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let rules = try RulesCommandSupport.loadRules(arguments)
        let event = try RulesCommandSupport.loadEvent(arguments)
        print(RulesExplanationText.render(rules.explain(event), file: rules.file))
        return 0
    }
}

/// The text `rules explain` prints.
enum RulesExplanationText {
    static func render(_ explanations: [RuleExplanation], file: String) -> String {
        var lines: [String] = []
        var winner: String?
        var matched: [String] = []
        for rule in explanations {
            let place = "\(file):\(rule.position.line)"
            if !rule.reached {
                lines.append(
                    "rule \(rule.ruleID) (\(place)): not tried; rule \(winner ?? "?") matched first "
                        + "and does not continue")
                continue
            }
            let verdict = rule.matched ? "MATCHES" + (rule.continues ? " (continues)" : "") : "does not match"
            lines.append("rule \(rule.ruleID) (\(place)): \(verdict)")
            if rule.conditions.isEmpty { lines.append("    matches every event (match: {})") }
            appendConditions(rule.conditions, indent: "    ", into: &lines)
            if rule.matched {
                matched.append(rule.ruleID)
                if !rule.continues { winner = rule.ruleID }
            }
        }
        lines.append(
            matched.isEmpty
                ? "result: no rule matches; every device gets outcome skipped (no_rule)"
                : "result: " + matched.joined(separator: ", ") + " applied")
        return lines.joined(separator: "\n")
    }

    static func appendConditions(_ conditions: [ConditionExplanation], indent: String, into lines: inout [String]) {
        for condition in conditions {
            let mark = condition.matched ? "✓" : "✗"
            let at = "line \(condition.position.line)"
            if condition.alternatives.isEmpty {
                let path = condition.path.isEmpty ? "(event)" : condition.path
                lines.append(
                    "\(indent)\(mark) \(path) \(condition.expectation); event has \(condition.actual)  [\(at)]")
            } else {
                lines.append(
                    "\(indent)\(mark) $or\(condition.path.isEmpty ? "" : " at " + condition.path): "
                        + (condition.matched ? "an alternative matches" : "no alternative matches") + "  [\(at)]")
                for (index, alternative) in condition.alternatives.enumerated() {
                    lines.append("\(indent)    alternative \(index + 1):")
                    appendConditions(alternative, indent: indent + "        ", into: &lines)
                }
            }
        }
    }
}
