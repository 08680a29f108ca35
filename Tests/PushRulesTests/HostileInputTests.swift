// Hostile events: quotes, newlines, template syntax, deep nesting, huge strings, invalid UTF-8,
// wrong shapes. Each gives a valid payload or a clear rejection, never a crash.

import APNs
import JSON
import TestSupport
import Testing

@testable import PushRules

@Suite struct HostileInputTests {
    static let rules = """
        version: 1
        rules:
          - id: chat
            match: {type: chat.message}
            alert:
              title: "{{ event.data.sender.name | default('?') | truncate(40) }}"
              body: "{{ event.data.text | default('') }}"
            thread_id: "{{ event.data.thread_id | default('none') }}"
            collapse_id: "{{ event.id | default(null) }}"
            custom:
              raw: "{{ event.data.blob | default(null) }}"
              copy: "{{ event.data.blob | default(null) | json }}"
        """

    /// Every decision for `event` is a valid send or a rejection with reasons; sends are within the
    /// limit and their payload round-trips through the strict JSON parser.
    static func checkSafe(_ event: JSONValue) throws -> [PushDecision] {
        let decisions = try Golden.load(rules).evaluate(event, now: Golden.now).decisions
        #expect(!decisions.isEmpty)
        for decision in decisions {
            switch decision {
            case .send(let push):
                let bytes = push.request.payload.compactBytes
                #expect(bytes.count <= push.request.pushType.payloadLimit)
                #expect(try JSONValue(parsing: bytes) == push.request.payload)
                #expect(push.request.validate().isEmpty)
            case .reject(let rejection):
                #expect(!rejection.problems.isEmpty)
            case .skip(let skip):
                #expect(!skip.detail.isEmpty)
            }
        }
        return decisions
    }

    static func event(data: JSONValue, id: JSONValue = "evt-1") -> JSONValue {
        [
            "id": id, "type": "chat.message", "occurred_at": "2026-11-29T12:00:00Z", "app": "com.example.chat",
            "devices": [["token": .string(Golden.token), "environment": "production"]], "data": data,
        ]
    }

    @Test func quotesNewlinesAndTemplateSyntaxInEventsStayText() throws {
        let nasty = "\"}]}\n\r\t\\ {{ event.id }} {% x %} \u{0}\u{1F} </script> \u{2028}\u{FEFF}"
        let decisions = try Self.checkSafe(
            Self.event(data: [
                "sender": ["name": .string(nasty)], "text": .string(nasty),
                "thread_id": .string(nasty),
            ]))
        guard case .send(let push) = decisions[0] else {
            Issue.record("\(decisions)")
            return
        }
        #expect(push.request.payload["aps"]?["alert"]?["body"] == .string(nasty))
        #expect(push.request.payload["aps"]?["thread-id"] == .string(nasty))
    }

    @Test func deeplyNestedDataIsCopiedOrRejectedCleanly() throws {
        var deep: JSONValue = "bottom"
        for _ in 0..<120 { deep = ["d": deep] }
        let decisions = try Self.checkSafe(Self.event(data: ["text": "x", "blob": deep]))
        guard case .send(let push) = decisions[0] else {
            Issue.record("\(decisions)")
            return
        }
        #expect(push.request.payload["raw"] == deep)
        // And the parser refuses what is deeper than its limit rather than recursing without end.
        let tooDeep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: tooDeep) }
    }

    @Test func hugeStringsAreShortenedOrRejectedNeverSentOversize() throws {
        let huge = String(repeating: "日本語テキスト😀", count: 100_000)
        let shortened = try Self.checkSafe(Self.event(data: ["text": .string(huge)]))
        guard case .send = shortened[0] else {
            Issue.record("\(shortened)")
            return
        }
        // A huge custom value is not a field the rule shortens: rejected, nothing sent.
        let rejected = try Self.checkSafe(Self.event(data: ["text": "x", "blob": .string(huge)]))
        guard case .reject(let rejection) = rejected[0] else {
            Issue.record("\(rejected)")
            return
        }
        #expect(rejection.reason == .payloadTooLarge)
        let hugeTitle = try Self.checkSafe(Self.event(data: ["sender": ["name": .string(huge)], "text": "x"]))
        guard case .send(let titled) = hugeTitle[0] else {
            Issue.record("\(hugeTitle)")
            return
        }
        #expect(titled.request.payload["aps"]?["alert"]?["title"]?.stringValue?.count == 40)
    }

    @Test func invalidUTF8NeverReachesTheRules() {
        // The decoder in front of the rules refuses it with its position; the rules only see valid text.
        var bytes = Array(#"{"id": "e", "data": {"text": "ok "#.utf8)
        bytes += [0xC3, 0x28, 0xFF, 0xED, 0xA0, 0x80]
        bytes += Array(#""}}"#.utf8)
        #expect {
            _ = try JSONValue(parsing: bytes)
        } throws: { error in
            (error as? JSONParseError)?.message == "invalid UTF-8 in a string"
        }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: #"{"t": "\udc00"}"#) }
    }

    @Test func wrongShapesGiveClearOutcomes() throws {
        // Not an object, or fields of the wrong type: skipped or rejected, with a reason.
        for event: JSONValue in ["a string", 42, .null, [], ["type": 7], ["type": "chat.message", "devices": 3]] {
            let decisions = try Self.checkSafe(event)
            #expect(decisions.count == 1)
        }
        let wrongData = try Self.checkSafe(Self.event(data: ["sender": "not an object", "text": ["a", "list"]]))
        guard case .reject(let rejection) = wrongData[0] else {
            Issue.record("\(wrongData)")
            return
        }
        #expect(rejection.reason == .templateError)
        #expect(
            rejection.problems == [
                "alert.body must be text, but the template gave a list; use | join(', ') or | json"
            ])
        let numericID = try Self.checkSafe(Self.event(data: ["text": "x"], id: 12345))
        guard case .send(let push) = numericID[0] else {
            Issue.record("\(numericID)")
            return
        }
        #expect(push.request.collapseID?.value == "12345")
    }

    @Test func randomEventsNeverCrashAndAlwaysGetAnOutcome() throws {
        var generator = SeededGenerator.replayable("randomEventsNeverCrash", defaultSeed: 42)
        let ruleSet = try RuleSet.load(contentsOf: ExampleRulesTests.examplePath)
        for _ in 0..<3000 {
            var event = JSONObject()
            event["id"] = .string("e\(generator.next() % 1000)")
            event["type"] = Self.randomType(&generator)
            event["occurred_at"] =
                generator.next() % 5 == 0
                ? Self.randomValue(&generator, depth: 0)
                : "2026-11-29T12:00:00Z"
            event["app"] = generator.next() % 7 == 0 ? Self.randomValue(&generator, depth: 0) : "com.example.chat"
            let locale = generator.next() % 2 == 0 ? "fr-CA" : Self.randomValue(&generator, depth: 1)
            event["recipient"] = ["locale": locale]
            event["devices"] =
                generator.next() % 9 == 0
                ? Self.randomValue(&generator, depth: 1)
                : [["token": .string(Golden.token), "environment": "production"]]
            event["data"] = Self.randomValue(&generator, depth: 0, object: true)
            if generator.next() % 3 == 0 { event["apns"] = Self.randomValue(&generator, depth: 1, object: true) }
            let decisions = ruleSet.evaluate(.object(event), now: Golden.now)
            #expect(!decisions.decisions.isEmpty)
            for case .send(let push) in decisions.decisions {
                #expect(push.request.payload.compactByteCount <= push.request.pushType.payloadLimit)
                #expect(push.request.validate().isEmpty)
            }
        }
    }

    static let types = [
        "chat.message", "chat.reaction", "call.incoming", "order.delivery_update", "sync.x",
        "social.story_liked", "calendar.event_starting", "safety.emergency", "nothing",
    ]
    static let keys = [
        "text", "sender", "name", "thread_id", "message_id", "unread_count", "attachment", "kind",
        "order", "number", "status", "eta", "like_count", "actor", "minutes_before", "highlights",
        "caller", "call_id", "emoji", "title", "conversation_kind", "mentions_recipient", "priority",
        "badge", "thread_muted", "card", "brand", "last4", "amount_cents",
    ]

    static func randomType(_ g: inout SeededGenerator) -> JSONValue {
        g.next() % 10 == 0 ? randomValue(&g, depth: 1) : .string(types[Int(g.next() % UInt64(types.count))])
    }

    static func randomValue(_ g: inout SeededGenerator, depth: Int, object: Bool = false) -> JSONValue {
        let choice = object ? 6 : g.next() % (depth > 3 ? 5 : 8)
        switch choice {
        case 0: return .null
        case 1: return .bool(g.next() % 2 == 0)
        case 2: return .int(Int64(bitPattern: g.next()) % 100_000)
        case 3: return .double(Double(g.next() % 10_000) / 7)
        case 4:
            let samples = [
                "", "hi", "\"{{ x }}\"\n", "日本語", "😀", "2026-11-29T12:30:00Z", "photo", "channel",
                String(repeating: "long ", count: Int(g.next() % 2000)),
            ]
            return .string(samples[Int(g.next() % UInt64(samples.count))])
        case 5: return .array((0..<Int(g.next() % 4)).map { _ in randomValue(&g, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int(g.next() % 6) {
                object[keys[Int(g.next() % UInt64(keys.count))]] = randomValue(&g, depth: depth + 1)
            }
            return .object(object)
        }
    }
}
