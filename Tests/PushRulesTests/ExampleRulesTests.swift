// The example rules file users copy (examples/rules.yaml) must load, and its rules must do what
// their comments say for the sample events.

import APNs
import Foundation
import JSON
import Testing

@testable import PushRules

@Suite struct ExampleRulesTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let examplePath = repositoryRoot.appendingPathComponent("examples/rules.yaml").path
    static let eventPath = repositoryRoot.appendingPathComponent("examples/event.json").path

    @Test func theExampleRulesFilePassesCheck() throws {
        let rules = try RuleSet.load(contentsOf: Self.examplePath)
        #expect(rules.ruleIDs.count >= 20)
        #expect(rules.summary.hasSuffix("25 rules, 5 locales (default en), 113 templates"))
    }

    @Test func theExampleEventBecomesTwoChatRequests() throws {
        let rules = try RuleSet.load(contentsOf: Self.examplePath)
        let event = try JSONValue(parsing: try Data(contentsOf: URL(fileURLWithPath: Self.eventPath)))
        let lines = rules.evaluate(event, now: Golden.now).decisions.map {
            $0.json(includingAPNsID: false).compactString
        }
        let body =
            #"{"aps":{"alert":{"title":"Ana","body":"hi"},"badge":3,"sound":"default","thread-id":"t7","#
            + #""category":"MESSAGE","mutable-content":1},"thread":"t7","message_id":"m42"}"#
        let headers =
            #"{"apns-push-type":"alert","apns-topic":"com.example.chat","apns-priority":"5","#
            + #""apns-expiration":"1796040000","apns-collapse-id":"evt-9f2"}"#
        #expect(
            lines == [
                #"{"device":0,"rule":"chat-message","status":"send","method":"POST","url":"https://api.push.apple.com"#
                    + #"/3/device/8f3c2a1be4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1","headers":"#
                    + headers + #","body":"# + body + "}",
                #"{"device":1,"rule":"chat-message","status":"send","method":"POST","url":"https://api.sandbox.push"#
                    + #".apple.com/3/device/0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9","headers":"#
                    + headers + #","body":"# + body + "}",
            ])
    }

    /// Which rule each kind of event reaches, and a key part of what it sends.
    @Test(arguments: [
        ("chat.message", #"{"thread_muted": true}"#, "muted-thread", "skipped"),
        ("marketing.weekly_digest", #"{"highlights": ["a"]}"#, "do-not-disturb-marketing", "skipped"),
        (
            "chat.message",
            #"{"mentions_recipient": true, "sender": {"name": "Bo"}, "text": "hey", "thread_id": "t", "message_id": "m"}"#,
            "chat-mention", "send"
        ),
        (
            "chat.message",
            #"{"attachment": {"kind": "Image", "url": "u"}, "sender": {"name": "Bo"}, "thread_id": "t"}"#,
            "chat-photo", "send"
        ),
        (
            "chat.message",
            #"{"conversation_kind": "channel", "channel": {"name": "general"}, "sender": {"name": "Bo"}, "text": "x", "#
                + #""thread_id": "t"}"#,
            "chat-channel-message", "send"
        ),
        (
            "chat.reaction",
            #"{"sender": {"name": "Bo"}, "emoji": "👍", "thread_id": "t", "message_id": "m"}"#,
            "chat-reaction", "send"
        ),
        ("chat.read", #"{"thread_id": "t"}"#, "chat-read-sync", "send"),
        ("call.incoming", #"{"call_id": "c", "caller": {"name": "Bo"}}"#, "call-incoming", "send"),
        ("call.missed", #"{"call_id": "c", "caller": {"name": "Bo"}}"#, "call-missed", "send"),
        (
            "order.delivery_started",
            #"{"order": {"number": "A1", "eta_text": "today"}, "status": "packed", "eta": "2026-11-29T14:00:00Z"}"#,
            "delivery-activity-start", "send"
        ),
        (
            "order.delivery_update",
            #"{"status": "near", "eta": "2026-11-29T14:00:00Z"}"#,
            "delivery-activity-update", "send"
        ),
        (
            "order.delivery_update",
            #"{"status": "delivered", "delivered_at": "2026-11-29T13:00:00Z", "order": {"number": "A1"}}"#,
            "delivery-activity-end", "send"
        ),
        ("order.shipped", #"{"order": {"number": "A1"}, "carrier": "ups"}"#, "order-shipped", "send"),
        (
            "billing.payment_failed",
            #"{"amount_cents": 500, "card": {"brand": "visa", "last4": "4242"}}"#,
            "payment-failed", "send"
        ),
        ("security.new_device", #"{"device_name": "iPad"}"#, "security-new-login", "send"),
        ("security.password_changed", #"{}"#, "security-password-changed", "send"),
        ("social.friend_request", #"{"actor": {"name": "Bo", "id": "u9"}}"#, "friend-request", "send"),
        (
            "social.story_liked",
            #"{"actor": {"name": "Bo"}, "like_count": 12, "story_id": "s"}"#,
            "story-likes-many", "send"
        ),
        ("social.story_liked", #"{"actor": {"name": "Bo"}, "like_count": 2, "story_id": "s"}"#, "story-liked", "send"),
        (
            "calendar.event_starting",
            #"{"minutes_before": 10, "title": "Standup", "starts_text": "in 10 minutes"}"#,
            "calendar-reminder", "send"
        ),
        ("marketing.weekly_digest", #"{"highlights": ["a", "b"]}"#, "weekly-digest", "send"),
        ("sync.contacts", #"{"cursor": 7}"#, "content-sync", "send"),
        ("widget.refresh", #"{}"#, "widget-refresh", "send"),
        ("calendar.event_starting", #"{"minutes_before": 60}"#, "", "skipped"),
    ])
    func eachSampleEventReachesItsRule(type: String, data: String, rule: String, status: String) throws {
        let rules = try RuleSet.load(contentsOf: Self.examplePath)
        var extra = ""
        if type.hasPrefix("marketing."), rule == "weekly-digest" {
            extra = #""recipient": {"locale": "fr-CA", "marketing_opt_in": true}"#
        }
        var text = Golden.event(type: type, data: data)
        if !extra.isEmpty {
            text = text.replacingOccurrences(of: #""recipient": {"user_id": "u1", "locale": "fr-CA"}, "#, with: "")
            text = String(text.dropLast()) + ", " + extra + "}"
        }
        let decisions = rules.evaluate(try JSONValue(parsing: text), now: Golden.now)
        let decision = decisions.decisions[0].json(includingAPNsID: false)
        #expect(decision["rule"] == (rule.isEmpty ? .null : .string(rule)), "\(decision.compactString)")
        #expect(decision["status"] == .string(status), "\(decision.compactString)")
    }

    @Test func theExampleLocalizesForTheRecipient() throws {
        let rules = try RuleSet.load(contentsOf: Self.examplePath)
        func body(_ locale: String) throws -> String? {
            let event = Golden.event(type: "call.missed", data: #"{"call_id": "c", "caller": {"name": "Bo"}}"#)
                .replacingOccurrences(of: "fr-CA", with: locale)
            let decision = rules.evaluate(try JSONValue(parsing: event), now: Golden.now).decisions[0]
            return decision.json()["body"]?["aps"]?["alert"]?["body"]?.stringValue
        }
        #expect(try body("fr-CA") == "Appel manqué de Bo")
        #expect(try body("de-AT") == "Verpasster Anruf von Bo")
        #expect(try body("ja") == "Boさんからの不在着信")
        #expect(try body("pt-BR") == "Missed call from Bo")
    }
}
