// Golden tests of `match`: every operator, lists, nesting, arrays in events, $or, rule order.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct MatchingTests {
    /// A rules file with one catch-nothing-else rule per pattern, each sending `alert: <id>`.
    static func rules(_ pattern: String) -> String {
        """
        version: 1
        rules:
          - id: hit
            match: \(pattern)
            alert: hit
        """
    }

    /// Whether an event with `data` (and type chat.message) matches `pattern`.
    static func matches(_ pattern: String, data: String, type: String = "chat.message") throws -> Bool {
        let decision = try Golden.decision(rules(pattern), Golden.event(type: type, data: data))
        if decision["status"] == "send" { return true }
        #expect(decision["reason"] == "no_rule")
        return false
    }

    @Test func exactValueMatchesOnlyThatValue() throws {
        #expect(try Self.matches("{type: chat.message}", data: "{}"))
        #expect(try !Self.matches("{type: chat.messages}", data: "{}"))
        #expect(try !Self.matches("{type: Chat.Message}", data: "{}"))
    }

    @Test func listOfValuesMatchesAnyOfThem() throws {
        let pattern = "{type: [chat.reaction, chat.message]}"
        #expect(try Self.matches(pattern, data: "{}"))
        #expect(try Self.matches(pattern, data: "{}", type: "chat.reaction"))
        #expect(try !Self.matches(pattern, data: "{}", type: "chat.read"))
    }

    @Test func keysMustAllMatch() throws {
        let pattern = "{type: chat.message, data: {priority: high, kind: dm}}"
        #expect(try Self.matches(pattern, data: #"{"priority": "high", "kind": "dm"}"#))
        #expect(try !Self.matches(pattern, data: #"{"priority": "high", "kind": "group"}"#))
        #expect(try !Self.matches(pattern, data: #"{"priority": "high"}"#))
    }

    @Test func numbersCompareByValueAndNeverEqualTheirText() throws {
        #expect(try Self.matches("{data: {count: 3}}", data: #"{"count": 3.0}"#))
        #expect(try Self.matches("{data: {ratio: 0.5}}", data: #"{"ratio": 0.5}"#))
        #expect(try !Self.matches("{data: {count: 3}}", data: #"{"count": "3"}"#))
        #expect(try Self.matches(#"{data: {count: "3"}}"#, data: #"{"count": "3"}"#))
    }

    @Test func textAndNamesCompareAsSwiftStringsWhateverTheirEscapesOrLength() throws {
        // An escaped name and text in the event, a precomposed accent in the pattern against a decomposed one.
        #expect(try Self.matches("{data: {kind: café}}", data: #"{"k\u0069nd": "cafe\u0301"}"#))
        #expect(try !Self.matches("{data: {kind: café}}", data: #"{"kind": "cafe"}"#))
        // Names and texts longer than Swift keeps inline (15 bytes), and numbers the other way round.
        #expect(
            try Self.matches(
                "{data: {conversation_participant_kind: direct_message_thread}}",
                data: #"{"conversation_participant_kind": "direct_message_thread"}"#))
        #expect(try Self.matches("{data: {count: 3.0}}", data: #"{"count": 3}"#))
        #expect(try !Self.matches("{data: {count: 3.5}}", data: #"{"count": 3}"#))
    }

    @Test func booleansAndNullMatchTheirJSONValues() throws {
        #expect(try Self.matches("{data: {urgent: true}}", data: #"{"urgent": true}"#))
        #expect(try !Self.matches("{data: {urgent: true}}", data: #"{"urgent": "true"}"#))
        #expect(try Self.matches("{data: {topic: null}}", data: #"{"topic": null}"#))
        #expect(try !Self.matches("{data: {topic: null}}", data: #"{}"#))
    }

    @Test func prefixAndSuffix() throws {
        #expect(try Self.matches(#"{type: {prefix: "chat."}}"#, data: "{}"))
        #expect(try !Self.matches(#"{type: {prefix: "chat."}}"#, data: "{}", type: "chatter"))
        #expect(try Self.matches(#"{type: [{suffix: ".message"}]}"#, data: "{}"))
        #expect(try !Self.matches(#"{type: [{suffix: ".message"}]}"#, data: "{}", type: "chat.messages"))
        // Operators test text only.
        #expect(try !Self.matches(#"{data: {n: {prefix: "1"}}}"#, data: #"{"n": 12}"#))
    }

    @Test func equalsIgnoreCase() throws {
        let pattern = "{data: {kind: {equals-ignore-case: PHOTO}}}"
        #expect(try Self.matches(pattern, data: #"{"kind": "photo"}"#))
        #expect(try Self.matches(pattern, data: #"{"kind": "PhOtO"}"#))
        #expect(try !Self.matches(pattern, data: #"{"kind": "photos"}"#))
    }

    @Test func anythingButExcludesValuesAndNeedsTheFieldPresent() throws {
        let pattern = "{data: {kind: {anything-but: [channel, broadcast]}}}"
        #expect(try Self.matches(pattern, data: #"{"kind": "dm"}"#))
        #expect(try !Self.matches(pattern, data: #"{"kind": "channel"}"#))
        #expect(try !Self.matches(pattern, data: #"{"kind": "broadcast"}"#))
        #expect(try !Self.matches(pattern, data: #"{}"#))
        #expect(try Self.matches("{data: {kind: {anything-but: dm}}}", data: #"{"kind": "group"}"#))
        #expect(try !Self.matches("{data: {kind: {anything-but: dm}}}", data: #"{"kind": "dm"}"#))
    }

    @Test func anythingButAPrefix() throws {
        let pattern = #"{type: {anything-but: {prefix: "marketing."}}}"#
        #expect(try Self.matches(pattern, data: "{}"))
        #expect(try !Self.matches(pattern, data: "{}", type: "marketing.digest"))
    }

    @Test func numericRanges() throws {
        let pattern = #"{data: {count: {numeric: [">=", 10, "<", 100]}}}"#
        #expect(try !Self.matches(pattern, data: #"{"count": 9}"#))
        #expect(try Self.matches(pattern, data: #"{"count": 10}"#))
        #expect(try Self.matches(pattern, data: #"{"count": 99.5}"#))
        #expect(try !Self.matches(pattern, data: #"{"count": 100}"#))
        #expect(try !Self.matches(pattern, data: #"{"count": "50"}"#))
        #expect(try Self.matches(#"{data: {count: {numeric: ["=", 3]}}}"#, data: #"{"count": 3}"#))
        #expect(try Self.matches(#"{data: {count: {numeric: ["<=", 0]}}}"#, data: #"{"count": -2}"#))
        #expect(try Self.matches(#"{data: {count: {numeric: [">", 0]}}}"#, data: #"{"count": 0.01}"#))
    }

    @Test func existsAndNotExists() throws {
        #expect(try Self.matches("{data: {muted: {exists: true}}}", data: #"{"muted": false}"#))
        #expect(try Self.matches("{data: {muted: {exists: true}}}", data: #"{"muted": null}"#))
        #expect(try !Self.matches("{data: {muted: {exists: true}}}", data: #"{}"#))
        #expect(try Self.matches("{data: {muted: {exists: false}}}", data: #"{}"#))
        #expect(try !Self.matches("{data: {muted: {exists: false}}}", data: #"{"muted": false}"#))
        // A missing parent means a missing field.
        #expect(try Self.matches("{recipient: {settings: {dnd: {exists: false}}}}", data: "{}"))
    }

    @Test func aValueOrAbsentFromOneList() throws {
        let pattern = "{data: {kind: [dm, {exists: false}]}}"
        #expect(try Self.matches(pattern, data: #"{"kind": "dm"}"#))
        #expect(try Self.matches(pattern, data: #"{}"#))
        #expect(try !Self.matches(pattern, data: #"{"kind": "group"}"#))
    }

    @Test func arraysInTheEventMatchWhenAnyElementDoes() throws {
        #expect(try Self.matches("{data: {tags: urgent}}", data: #"{"tags": ["news", "urgent"]}"#))
        #expect(try !Self.matches("{data: {tags: urgent}}", data: #"{"tags": ["news"]}"#))
        #expect(try Self.matches("{data: {items: {sku: B2}}}", data: #"{"items": [{"sku": "A1"}, {"sku": "B2"}]}"#))
        #expect(try Self.matches("{data: {tags: {exists: false}}}", data: #"{"tags": []}"#))
        #expect(
            try Self.matches(
                "{devices: {environment: sandbox}}", data: "{}",
                type: "chat.message") == false)
    }

    @Test func orOfAlternativePatterns() throws {
        let pattern = """
            {$or: [{type: call.missed}, {type: chat.message, data: {urgent: true}}]}
            """
        #expect(try Self.matches(pattern, data: #"{"urgent": true}"#))
        #expect(try !Self.matches(pattern, data: #"{"urgent": false}"#))
        #expect(try Self.matches(pattern, data: "{}", type: "call.missed"))
        // $or nested under a key reads paths from there.
        let nested = "{data: {$or: [{a: 1}, {b: 2}]}}"
        #expect(try Self.matches(nested, data: #"{"b": 2}"#))
        #expect(try !Self.matches(nested, data: #"{"a": 2, "b": 1}"#))
    }

    @Test func anEmptyPatternMatchesEveryEvent() throws {
        #expect(try Self.matches("{}", data: "{}", type: "anything.at.all"))
    }

    @Test func firstMatchingRuleWinsUnlessItContinues() throws {
        let rules = """
            version: 1
            rules:
              - id: first
                match: {type: chat.message}
                alert: one
              - id: second
                match: {type: chat.message}
                alert: two
            """
        let event = Golden.event()
        let ruleSet = try Golden.load(rules)
        let decisions = ruleSet.evaluate(try JSONValue(parsing: event), now: Golden.now)
        #expect(decisions.matchedRuleIDs == ["first"])
        #expect(decisions.decisions.map(\.ruleID) == ["first"])

        let continuing = rules.replacingOccurrences(of: "alert: one", with: "alert: one\n    continue: true")
        let both = try Golden.load(continuing).evaluate(try JSONValue(parsing: event), now: Golden.now)
        #expect(both.matchedRuleIDs == ["first", "second"])
        #expect(
            try Golden.lines(continuing, event).map { try JSONValue(parsing: $0)["body"]?["aps"]?["alert"] }
                == ["one", "two"])
    }

    @Test func anEventNoRuleMatchesIsSkippedPerDeviceWithReasonNoRule() throws {
        let event = Golden.event(
            type: "unknown.kind",
            devices: """
                [{"token": "\(Golden.token)", "environment": "production"},
                 {"token": "\(Golden.token2)", "environment": "sandbox"}]
                """)
        let lines = try Golden.lines(Self.rules("{type: chat.message}"), event)
        let detail = #""detail":"no rule matches events of type \"unknown.kind\""}"#
        #expect(
            lines == [
                #"{"device":0,"rule":null,"status":"skipped","reason":"no_rule","# + detail,
                #"{"device":1,"rule":null,"status":"skipped","reason":"no_rule","# + detail,
            ])
    }

    @Test func aSkipRuleSkipsWithItsReason() throws {
        let rules = """
            version: 1
            rules:
              - id: muted
                match: {data: {muted: true}}
                skip: the thread is muted
              - id: chat
                match: {type: chat.message}
                alert: hi
            """
        #expect(
            try Golden.lines(rules, Golden.event(data: #"{"muted": true}"#)) == [
                #"{"device":0,"rule":"muted","status":"skipped","reason":"skipped_by_rule","#
                    + #""detail":"the thread is muted"}"#
            ])
        #expect(try Golden.decision(rules, Golden.event(data: #"{"muted": false}"#))["rule"] == "chat")
    }

    @Test func theTypeIndexPicksTheSameRulesAsTryingEveryRule() throws {
        let rules = """
            version: 1
            rules:
              - id: a
                match: {type: [x.one, x.two]}
                alert: a
                continue: true
              - id: b
                match: {type: {prefix: "x."}}
                alert: b
                continue: true
              - id: c
                match: {data: {n: {numeric: [">", 1]}}}
                alert: c
                continue: true
              - id: d
                match: {type: x.two}
                alert: d
                continue: true
              - id: e
                match: {$or: [{type: x.three}, {type: x.one}]}
                alert: e
            """
        let ruleSet = try Golden.load(rules)
        let types: [JSONValue] = ["x.one", "x.two", "x.three", "y", ["x.two", "y"], 7, .null]
        for type in types {
            for n in [0, 5] {
                var object: JSONObject = ["id": "e1", "data": ["n": .int(Int64(n))]]
                object["type"] = type
                let event = JSONValue.object(object)
                let indexed = ruleSet.evaluate(event, now: Golden.now).matchedRuleIDs
                var expected: [String] = []
                JSONTape(event).withRoot { root in
                    for rule in ruleSet.rules where rule.pattern.matches(root) {
                        expected.append(rule.id)
                        if !rule.continues { break }
                    }
                }
                #expect(indexed == expected, "type \(type.compactString), n \(n)")
            }
        }
        let oneTwo = ruleSet.evaluate(["type": ["x.two", "y"], "data": [:]], now: Golden.now).matchedRuleIDs
        #expect(oneTwo == ["a", "b", "d"])
    }
}
