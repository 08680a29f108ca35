// Shared helpers for the golden tests: load inline rules, evaluate an inline event, and compare the
// decisions, one compact JSON line each (apns-id left out: it is fresh per attempt).

import APNs
import JSON
import Testing

@testable import PushRules

enum Golden {
    /// 2026-11-29T12:00:00Z, the time of the sample events.
    static let eventTime: Int64 = 1_795_953_600
    static let now: Int64 = eventTime + 5

    static let token = String(repeating: "ab", count: 32)
    static let token2 = String(repeating: "cd", count: 32)

    /// An event of `type` with `data`, for one production device, as JSON text.
    static func event(
        type: String = "chat.message", data: String = "{}", extra: String = "",
        devices: String? = nil
    ) -> String {
        let deviceList = devices ?? #"[{"token": "\#(token)", "environment": "production"}]"#
        return """
            {"id": "evt-1", "type": "\(type)", "occurred_at": "2026-11-29T12:00:00Z", "app": "com.example.chat",
             "recipient": {"user_id": "u1", "locale": "fr-CA"}, "devices": \(deviceList),
             "data": \(data)\(extra.isEmpty ? "" : ", " + extra)}
            """
    }

    static func load(_ rules: String, file: String = "rules.yaml") throws -> RuleSet {
        do {
            return try RuleSet(text: rules, file: file)
        } catch {
            Issue.record("rules did not load:\n\(error)")
            throw error
        }
    }

    /// The decisions for `event`, one compact JSON line each.
    static func lines(_ rules: String, _ event: String, now: Int64 = now) throws -> [String] {
        let ruleSet = try load(rules)
        return try lines(ruleSet, event, now: now)
    }

    static func lines(_ ruleSet: RuleSet, _ event: String, now: Int64 = now) throws -> [String] {
        let value = try JSONValue(parsing: event)
        return ruleSet.evaluate(value, now: now).decisions.map { $0.json(includingAPNsID: false).compactString }
    }

    /// The single decision's JSON object.
    static func decision(_ rules: String, _ event: String, now: Int64 = now) throws -> JSONValue {
        let found = try lines(rules, event, now: now)
        #expect(found.count == 1, "expected one decision, got \(found)")
        return try JSONValue(parsing: found.first ?? "null")
    }

    /// The payload of the single decision, compact.
    static func body(_ rules: String, _ event: String) throws -> String {
        let decision = try decision(rules, event)
        #expect(decision["status"] == "send", "not sent: \(decision.compactString)")
        return decision["body"]?.compactString ?? "<none>"
    }

    /// The problems of a rules file that fails to load, one description each.
    static func problems(_ rules: String, file: String = "rules.yaml") -> [String] {
        do {
            _ = try RuleSet(text: rules, file: file)
            Issue.record("expected the rules to fail to load")
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }
}
