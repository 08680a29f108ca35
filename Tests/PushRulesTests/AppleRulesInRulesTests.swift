// Apple's rules as the rules file checks them at load: priority 1, Live Activity relevance scores,
// content-state on every event, an alert on a start, input_push_token / input_push_channel on starts,
// and the push types each app's rules send (what `run --check` compares with certificates).

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct AppleRulesInRulesTests {
    static func rule(_ fields: String) -> String { PushFieldTests.rule(fields) }

    @Test func priorityOneLoadsForAlertsAndIsRefusedForBackground() throws {
        let alert = try Golden.decision(Self.rule("alert: hi\npriority: 1"), Golden.event())
        #expect(alert["headers"]?["apns-priority"] == "1")
        let problems = Golden.problems(Self.rule("push_type: background\npriority: 1"))
        #expect(problems.count == 1)
        #expect(problems.first?.contains("priority 1 is not allowed for background pushes") == true)
    }

    @Test func aLiveActivityRelevanceScoreIsAnyNumber() throws {
        let rules = Self.rule(
            """
            push_type: liveactivity
            live_activity: {event: update, content_state: {eta: 5}}
            relevance_score: 50
            """)
        #expect(try Golden.body(rules, Golden.event()).contains(#""relevance-score":50"#))
        let alert = Golden.problems(Self.rule("alert: hi\nrelevance_score: 50"))
        #expect(alert.first?.contains("relevance_score must be a number from 0 to 1") == true)
    }

    @Test func everyEventNeedsContentStateAndAStartAnAlert() {
        let end = Golden.problems(Self.rule("push_type: liveactivity\nlive_activity: {event: end}"))
        #expect(end.first?.contains("a Live Activity end needs live_activity.content_state") == true)
        let start = Golden.problems(
            Self.rule(
                """
                push_type: liveactivity
                live_activity: {event: start, attributes_type: A, attributes: {a: 1}, content_state: {b: 2}}
                """))
        #expect(start.count == 1)
        #expect(start.first?.contains("a Live Activity start needs an alert") == true)
    }

    @Test func inputPushChannelStartsAnActivityOnAChannel() throws {
        let rules = Self.rule(
            """
            push_type: liveactivity
            live_activity:
              event: start
              attributes_type: A
              attributes: {a: 1}
              content_state: {b: 2}
              input_push_channel: "{{ event.data.channel }}"
            alert: {title: Started}
            """)
        #expect(
            try Golden.body(rules, Golden.event(data: #"{"channel": "dHN0LXNyY2gtY2hubA=="}"#))
                .contains(#""input-push-channel":"dHN0LXNyY2gtY2hubA==""#))
        let update = Golden.problems(
            Self.rule(
                """
                push_type: liveactivity
                live_activity: {event: update, content_state: {b: 2}, input_push_token: true}
                """))
        #expect(update.first?.contains("live_activity.input_push_token belongs to event: start") == true)
    }

    @Test func eventOverridesMayCarryALiveActivityRelevanceScore() throws {
        let rules = Self.rule(
            """
            push_type: liveactivity
            live_activity: {event: update, content_state: {eta: 5}}
            accept_overrides: [relevance_score]
            """)
        let body = try Golden.body(rules, Golden.event(extra: #""apns": {"relevance_score": 75}"#))
        #expect(body.contains(#""relevance-score":75"#))
    }

    @Test func pushTypesAreListedByTheAppTheRulesName() throws {
        let rules = try Golden.load(
            """
            version: 1
            rules:
              - id: call
                match: {type: call}
                app: com.example.phone
                push_type: voip
                custom: {call: "{{ event.id }}"}
              - id: chat
                match: {}
                alert: hi
            """)
        let types = rules.pushTypes
        #expect(types.byApp == ["com.example.phone": [.voip]])
        #expect(types.anyApp == [.alert])
        #expect(types.pushTypes(forApp: "com.example.phone") == [.voip, .alert])
    }
}
