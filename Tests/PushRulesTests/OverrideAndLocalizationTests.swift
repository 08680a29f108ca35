// Golden tests of the event's `apns` overrides (accepted, ignored, invalid) and of server-side
// localization with its fallback chain.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct OverrideTests {
    static let rules = """
        version: 1
        rules:
          - id: strict
            match: {type: strict}
            alert: hi
          - id: silent
            match: {type: silent}
            push_type: background
            accept_overrides: all
          - id: r
            match: {}
            alert: hi
            badge: 1
            accept_overrides: [priority, badge, expiration, collapse_id, thread_id, sound, category,
                               interruption_level, relevance_score]
        """

    static func decide(_ apns: String, type: String = "chat.message") throws -> JSONValue {
        try Golden.decision(rules, Golden.event(type: type, extra: #""apns": \#(apns)"#))
    }

    @Test func acceptedOverridesReplaceTheRulesValues() throws {
        let decision = try Self.decide(
            """
            {"priority": 5, "badge": 9, "expiration": 1795960000, "collapse_id": "c1", "thread_id": "t",
             "sound": "bell.caf", "category": "C", "interruption_level": "passive", "relevance_score": 0.5}
            """)
        #expect(
            decision["headers"]?.compactString
                == #"{"apns-push-type":"alert","apns-topic":"com.example.chat","apns-priority":"5","#
                + #""apns-expiration":"1795960000","apns-collapse-id":"c1"}"#)
        #expect(
            decision["body"]?.compactString
                == #"{"aps":{"alert":"hi","badge":9,"thread-id":"t","sound":"bell.caf","category":"C","#
                + #""interruption-level":"passive","relevance-score":0.5}}"#)
        #expect(decision["notes"] == nil)
    }

    @Test func overridesTheRuleDoesNotAcceptAreIgnoredWithANote() throws {
        let decision = try Self.decide(#"{"priority": 5, "badge": 3, "colour": "red"}"#, type: "strict")
        #expect(decision["headers"]?["apns-priority"] == "10")
        #expect(decision["body"]?.compactString == #"{"aps":{"alert":"hi"}}"#)
        #expect(
            decision["notes"] == [
                "event override apns.priority ignored: the rule does not accept it (accept_overrides)",
                "event override apns.badge ignored: the rule does not accept it (accept_overrides)",
                .string(
                    "event override apns.colour ignored: not an overridable field (overridable: priority, expiration, "
                        + "collapse_id, thread_id, badge, sound, category, interruption_level, relevance_score)"),
            ])
    }

    @Test func anInvalidAcceptedOverrideRejectsThePush() throws {
        let decision = try Self.decide(#"{"priority": 7, "badge": "lots"}"#)
        #expect(decision["status"] == "rejected")
        #expect(decision["reason"] == "InvalidOverride")
        #expect(
            decision["problems"] == [
                "apns.priority is 7; use 10, 5 or 1",
                "apns.badge is \"lots\"; use a whole number from 0",
            ])
    }

    @Test func anOverrideThePushTypeDoesNotCarryIsIgnored() throws {
        let decision = try Self.decide(#"{"badge": 2, "priority": 5}"#, type: "silent")
        #expect(decision["body"]?.compactString == #"{"aps":{"content-available":1}}"#)
        #expect(decision["notes"] == ["event override apns.badge ignored: background pushes do not carry it"])
    }

    @Test func anOverriddenPriorityTheModelRejectsIsARejection() throws {
        let decision = try Self.decide(#"{"priority": 10}"#, type: "silent")
        #expect(decision["reason"] == "InvalidRequest")
        #expect(
            decision["problems"]?[0]?.stringValue?.hasPrefix(
                "apns-priority: priority 10 is not allowed for background pushes") == true)
    }

    @Test func anOverriddenExpirationInThePastSkips() throws {
        let decision = try Self.decide(#"{"expiration": 1000}"#)
        #expect(decision["reason"] == "expired")
    }
}

@Suite struct LocalizationTests {
    static let rules = """
        version: 1
        localization:
          default_locale: en
          tables:
            en:
              greeting: "Hello {{ event.data.name }}"
              farewell: Bye
              chat:
                photo: "{{ event.data.name }} sent a photo"
            fr:
              greeting: "Bonjour {{ event.data.name }}"
              chat: {photo: "{{ event.data.name }} a envoyé une photo"}
            fr-CA:
              greeting: "Allô {{ event.data.name }}"
            zh-Hant:
              greeting: "你好 {{ event.data.name }}"
        rules:
          - id: r
            match: {}
            alert:
              title: "{{ 'greeting' | t }}"
              subtitle: "{{ 'chat.photo' | t }}"
              body: "{{ 'farewell' | t }} ({{ locale }})"
        """

    static func alert(locale: String?) throws -> String {
        let recipient = locale.map { #"{"user_id": "u1", "locale": "\#($0)"}"# } ?? #"{"user_id": "u1"}"#
        let event =
            #"{"id": "e", "type": "t", "app": "com.example.chat", "recipient": \#(recipient), "#
            + #""devices": [{"token": "\#(Golden.token)", "environment": "production"}], "data": {"name": "Ana"}}"#
        return try Golden.decision(rules, event)["body"]?["aps"]?["alert"]?.compactString ?? "<none>"
    }

    @Test func theMostSpecificLocaleWinsAndMissingKeysFallBack() throws {
        #expect(
            try Self.alert(locale: "fr-CA")
                == #"{"title":"Allô Ana","subtitle":"Ana a envoyé une photo","body":"Bye (fr-CA)"}"#)
        let french = #"{"title":"Bonjour Ana","subtitle":"Ana a envoyé une photo","body":"Bye (fr)"}"#
        #expect(try Self.alert(locale: "fr") == french)
        #expect(try Self.alert(locale: "fr-BE") == french)
    }

    @Test func localeTagsAreMatchedIgnoringCaseAndUnderscores() throws {
        #expect(try Self.alert(locale: "fr_ca").hasPrefix(#"{"title":"Allô Ana""#))
        #expect(try Self.alert(locale: "FR-ca").hasPrefix(#"{"title":"Allô Ana""#))
        #expect(try Self.alert(locale: "zh-Hant-TW").hasPrefix(#"{"title":"你好 Ana""#))
    }

    @Test func unknownOrMissingLocalesUseTheDefault() throws {
        let english = #"{"title":"Hello Ana","subtitle":"Ana sent a photo","body":"Bye (en)"}"#
        #expect(try Self.alert(locale: "de-DE") == english)
        #expect(try Self.alert(locale: nil) == english)
        #expect(try Self.alert(locale: "") == english)
        #expect(try Self.alert(locale: String(repeating: "x", count: 500)) == english)
    }

    @Test func aKeyChosenAtRunTimeThatNoTableHasIsARejection() throws {
        let rules = Self.rules.replacingOccurrences(of: "{{ 'farewell' | t }}", with: "{{ event.data.key | t }}")
        let event = Golden.event(data: #"{"name": "Ana", "key": "nope"}"#)
        let decision = try Golden.decision(rules, event)
        #expect(decision["problems"] == ["alert.body: 'nope' | t: no locale in fr-CA → fr → en has this key"])
    }
}
