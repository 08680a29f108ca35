// Golden tests of every APNs field a rule can set: headers (topic with suffix, push type, priority,
// expiration, collapse id) and payload keys, per push type.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct PushFieldTests {
    static func rule(_ fields: String, match: String = "{}") -> String {
        """
        version: 1
        rules:
          - id: r
            match: \(match)
        \(fields.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n"))
        """
    }

    @Test func anAlertRequestExactlyAsSent() throws {
        let rules = Self.rule(
            """
            alert:
              title: "{{ event.data.sender.name }}"
              body: "{{ event.data.text }}"
            ttl: 1h
            collapse_id: "{{ event.id }}"
            """)
        let line = try Golden.lines(rules, Golden.event(data: #"{"sender": {"name": "Ana"}, "text": "hi"}"#))
        #expect(
            line == [
                #"{"device":0,"rule":"r","status":"send","method":"POST","url":"https://api.push.apple.com/3/device/"#
                    + Golden.token + #"","headers":{"apns-push-type":"alert","apns-topic":"com.example.chat","#
                    + #""apns-priority":"10","apns-expiration":"1795957200","apns-collapse-id":"evt-1"},"#
                    + #""body":{"aps":{"alert":{"title":"Ana","body":"hi"}}}}"#
            ])
    }

    @Test func eachDeviceGetsItsOwnRequestInItsEnvironment() throws {
        let devices = """
            [{"token": "\(Golden.token)", "environment": "production"},
             {"token": "\(Golden.token2.uppercased())", "environment": "development"}]
            """
        let decisions = try Golden.load(Self.rule("alert: hi"))
            .evaluate(try JSONValue(parsing: Golden.event(devices: devices)), now: Golden.now).decisions
        guard decisions.count == 2, case .send(let first) = decisions[0], case .send(let second) = decisions[1] else {
            Issue.record("expected two requests: \(decisions)")
            return
        }
        #expect(first.request.url == "https://api.push.apple.com/3/device/\(Golden.token)")
        #expect(second.request.url == "https://api.sandbox.push.apple.com/3/device/\(Golden.token2)")
        #expect(first.request.apnsID != second.request.apnsID)
        #expect(first.request.payload == second.request.payload)
    }

    @Test func templatesThatReadTheDeviceAreRenderedPerDevice() throws {
        let devices = """
            [{"token": "\(Golden.token)", "environment": "production", "model": "iPhone"},
             {"token": "\(Golden.token2)", "environment": "sandbox", "model": "iPad"}]
            """
        let rules = Self.rule(
            #"alert: "on your {{ device.model }}""# + "\n" + #"custom: {env: "{{ device.environment }}"}"#)
        let bodies = try Golden.lines(rules, Golden.event(devices: devices)).map {
            try JSONValue(parsing: $0)["body"]?.compactString
        }
        #expect(
            bodies == [
                #"{"aps":{"alert":"on your iPhone"},"env":"production"}"#,
                #"{"aps":{"alert":"on your iPad"},"env":"sandbox"}"#,
            ])
    }

    @Test func topicGetsThePushTypesSuffix() throws {
        func topic(_ fields: String, _ event: String = Golden.event()) throws -> JSONValue? {
            try Golden.decision(Self.rule(fields), event)["headers"]?["apns-topic"]
        }
        #expect(try topic("alert: hi") == "com.example.chat")
        #expect(try topic("alert: hi\napp: com.example.other") == "com.example.other")
        #expect(try topic("push_type: voip\ncustom: {call: 1}") == "com.example.chat.voip")
        #expect(try topic("push_type: complication") == "com.example.chat.complication")
        #expect(try topic("push_type: fileprovider") == "com.example.chat.pushkit.fileprovider")
        #expect(try topic("push_type: location") == "com.example.chat.location-query")
        #expect(try topic("push_type: pushtotalk") == "com.example.chat.voip-ptt")
        #expect(try topic("push_type: widgets") == "com.example.chat.push-type.widgets")
        #expect(try topic("push_type: controls") == "com.example.chat.push-type.controls")
        #expect(
            try topic("push_type: mdm\ntopic: com.apple.mgmt.External.1234\ncustom: {mdm: magic}")
                == "com.apple.mgmt.External.1234")
    }

    @Test func priorityDefaultsToThePushTypesAndCanBeSet() throws {
        func priority(_ fields: String) throws -> JSONValue? {
            try Golden.decision(Self.rule(fields), Golden.event())["headers"]?["apns-priority"]
        }
        #expect(try priority("alert: hi") == "10")
        #expect(try priority("alert: hi\npriority: 5") == "5")
        #expect(try priority("push_type: background") == "5")
        #expect(try priority("push_type: voip") == "10")
    }

    @Test func ttlSetsTheExpirationFromTheEventTime() throws {
        func expiration(_ fields: String, _ event: String = Golden.event()) throws -> JSONValue? {
            try Golden.decision(Self.rule(fields), event)["headers"]?["apns-expiration"]
        }
        #expect(try expiration("alert: hi") == nil)
        #expect(try expiration("alert: hi\nttl: 0") == "0")
        #expect(try expiration("alert: hi\nttl: 90") == .string(String(Golden.eventTime + 90)))
        #expect(try expiration("alert: hi\nttl: 1h30m") == .string(String(Golden.eventTime + 5400)))
        #expect(try expiration("alert: hi\nttl: 2d") == .string(String(Golden.eventTime + 172_800)))
        // Without occurred_at, the time of evaluation.
        let undated =
            #"{"id": "e", "type": "t", "app": "com.example.chat", "#
            + #""devices": [{"token": "\#(Golden.token)", "environment": "production"}]}"#
        #expect(try expiration("alert: hi\nttl: 60", undated) == .string(String(Golden.now + 60)))
    }

    @Test func aNotificationWhoseExpirationHasPassedIsSkipped() throws {
        let decision = try Golden.decision(
            Self.rule("alert: hi\nttl: 30m"), Golden.event(),
            now: Golden.eventTime + 3600)
        #expect(decision["status"] == "skipped")
        #expect(decision["reason"] == "expired")
        #expect(
            decision["detail"]
                == "the notification expired at 2026-11-29T12:30:00Z (1795955400), before 2026-11-29T13:00:00Z")
    }

    @Test func anUnreadableEventTimeIsARejection() throws {
        let event = Golden.event().replacingOccurrences(of: "2026-11-29T12:00:00Z", with: "yesterday")
        let decision = try Golden.decision(Self.rule("alert: hi\nttl: 1h"), event)
        #expect(decision["reason"] == "TemplateError")
        #expect(
            decision["problems"] == [
                .string(
                    "ttl: the event's occurred_at is \"yesterday\", not an RFC 3339 time such as 2026-11-29T12:00:00Z")
            ])
    }

    @Test func everyAlertPayloadField() throws {
        let rules = Self.rule(
            """
            alert:
              title: T
              subtitle: S
              body: B
              launch_image: L.png
            badge: "{{ event.data.unread }}"
            sound: ping.caf
            thread_id: "{{ event.data.thread }}"
            category: MESSAGE
            content_available: true
            mutable_content: true
            target_content_id: window-1
            interruption_level: time-sensitive
            relevance_score: 0.75
            filter_criteria: work
            custom:
              thread: "{{ event.data.thread }}"
              meta: {n: 1, tags: [a, "{{ event.data.thread }}"]}
            """)
        #expect(
            try Golden.body(rules, Golden.event(data: #"{"unread": 4, "thread": "t7"}"#))
                == #"{"aps":{"alert":{"title":"T","subtitle":"S","body":"B","launch-image":"L.png"},"badge":4,"#
                + #""sound":"ping.caf","thread-id":"t7","category":"MESSAGE","content-available":1,"mutable-content":1,"#
                + #""target-content-id":"window-1","interruption-level":"time-sensitive","relevance-score":0.75,"#
                + #""filter-criteria":"work"},"thread":"t7","meta":{"n":1,"tags":["a","t7"]}}"#)
    }

    @Test func anAlertCanBeAPlainText() throws {
        #expect(
            try Golden.body(Self.rule(#"alert: "{{ event.data.text }}""#), Golden.event(data: #"{"text": "yo"}"#))
                == #"{"aps":{"alert":"yo"}}"#)
    }

    @Test func badgeFromTextIsANumberAndAWrongBadgeIsARejection() throws {
        let rules = Self.rule(#"alert: hi"# + "\n" + #"badge: "{{ event.data.n }}""#)
        #expect(try Golden.body(rules, Golden.event(data: #"{"n": "7"}"#)) == #"{"aps":{"alert":"hi","badge":7}}"#)
        let bad = try Golden.decision(rules, Golden.event(data: #"{"n": "seven"}"#))
        #expect(bad["reason"] == "TemplateError")
        #expect(bad["problems"] == [#"badge must be a whole number, but the template gave "seven""#])
        let negative = try Golden.decision(rules, Golden.event(data: #"{"n": -1}"#))
        #expect(negative["problems"] == ["badge must be at least 0, but the template gave -1"])
    }

    @Test func criticalSound() throws {
        let rules = Self.rule(
            """
            alert: fire
            sound: {critical: true, name: alarm.caf, volume: 0.8}
            interruption_level: critical
            """)
        #expect(
            try Golden.body(rules, Golden.event())
                == #"{"aps":{"alert":"fire","sound":{"critical":1,"name":"alarm.caf","volume":0.8},"#
                + #""interruption-level":"critical"}}"#)
    }

    @Test func deviceSideLocalizationKeys() throws {
        let rules = Self.rule(
            """
            alert:
              title_loc_key: NEW_MESSAGE_TITLE
              title_loc_args: ["{{ event.data.sender }}"]
              subtitle_loc_key: SUB
              subtitle_loc_args: []
              loc_key: NEW_MESSAGE_BODY
              loc_args: ["{{ event.data.sender }}", "{{ event.data.count }}"]
            """)
        #expect(
            try Golden.body(rules, Golden.event(data: #"{"sender": "Ana", "count": 2}"#))
                == #"{"aps":{"alert":{"title-loc-key":"NEW_MESSAGE_TITLE","title-loc-args":["Ana"],"#
                + #""subtitle-loc-key":"SUB","subtitle-loc-args":[],"loc-key":"NEW_MESSAGE_BODY","#
                + #""loc-args":["Ana","2"]}}}"#)
    }

    @Test func backgroundPushCarriesOnlyContentAvailablePlusCustomData() throws {
        let rules = """
            version: 1
            defaults:
              sound: default
              badge: 1
            rules:
              - id: r
                match: {}
                push_type: background
                custom: {sync: "{{ event.type }}"}
            """
        let decision = try Golden.decision(rules, Golden.event())
        #expect(decision["headers"]?["apns-push-type"] == "background")
        #expect(decision["headers"]?["apns-priority"] == "5")
        #expect(decision["body"]?.compactString == #"{"aps":{"content-available":1},"sync":"chat.message"}"#)
    }

    @Test func voipPushesCarryTheirDataWithoutAps() throws {
        let rules = Self.rule(
            """
            push_type: voip
            ttl: 0
            custom:
              caller: "{{ event.data.caller }}"
              video: "{{ event.data.video | default(false) }}"
            """)
        let decision = try Golden.decision(rules, Golden.event(data: #"{"caller": {"name": "Bo", "id": 9}}"#))
        #expect(decision["headers"]?["apns-expiration"] == "0")
        #expect(decision["body"]?.compactString == #"{"caller":{"name":"Bo","id":9},"video":false}"#)
    }

    @Test func widgetsAndControlsPushesSayContentChanged() throws {
        let changed = #"{"aps":{"content-changed":true}}"#
        #expect(try Golden.body(Self.rule("push_type: widgets"), Golden.event()) == changed)
        #expect(try Golden.body(Self.rule("push_type: controls"), Golden.event()) == changed)
    }

    @Test func liveActivityStartWithEveryField() throws {
        let rules = Self.rule(
            """
            push_type: liveactivity
            live_activity:
              event: start
              attributes_type: DeliveryAttributes
              attributes: {order: "{{ event.data.order }}"}
              content_state: {status: "{{ event.data.status }}", stops: "{{ event.data.stops }}"}
              stale_date: "{{ event.data.eta }}"
              dismissal_date: 1795960000
              input_push_token: true
            alert:
              title: On its way
            relevance_score: 1
            """)
        let data = #"{"order": "A-1", "status": "packed", "stops": 4, "eta": "2026-11-29T13:00:00+01:00"}"#
        let decision = try Golden.decision(rules, Golden.event(data: data))
        #expect(decision["headers"]?["apns-topic"] == "com.example.chat.push-type.liveactivity")
        #expect(
            decision["body"]?.compactString
                == #"{"aps":{"alert":{"title":"On its way"},"relevance-score":1,"timestamp":1795953600,"event":"start","#
                + #""content-state":{"status":"packed","stops":4},"stale-date":1795953600,"dismissal-date":1795960000,"#
                + #""attributes-type":"DeliveryAttributes","attributes":{"order":"A-1"},"input-push-token":1}}"#)
    }

    @Test func liveActivityUpdateWithAnExplicitTimestamp() throws {
        let rules = Self.rule(
            """
            push_type: liveactivity
            live_activity:
              event: update
              timestamp: "{{ event.data.at }}"
              content_state: "{{ event.data.state }}"
            """)
        let data = #"{"at": 1795953000, "state": {"eta": 5}}"#
        #expect(
            try Golden.body(rules, Golden.event(data: data))
                == #"{"aps":{"timestamp":1795953000,"event":"update","content-state":{"eta":5}}}"#)
        let wrong = try Golden.decision(rules, Golden.event(data: #"{"at": 1795953000, "state": "soon"}"#))
        #expect(wrong["problems"] == ["live_activity.content_state must be an object, but the template gave a string"])
    }

    @Test func aRuleCanRemoveADefaultWithNull() throws {
        let rules = """
            version: 1
            defaults: {sound: default, badge: 1}
            rules:
              - id: quiet
                match: {}
                alert: hi
                sound: null
            """
        #expect(try Golden.body(rules, Golden.event()) == #"{"aps":{"alert":"hi","badge":1}}"#)
    }

    @Test func theRequestModelRejectsWhatTheTemplatesProduce() throws {
        // The topic comes from the event, so only the request model can check it.
        let rules = Self.rule(#"alert: hi"#)
        let event = Golden.event().replacingOccurrences(of: #""com.example.chat""#, with: #""com.example chat""#)
        let decision = try Golden.decision(rules, event)
        #expect(decision["reason"] == "InvalidRequest")
        let first = decision["problems"]?.arrayValue?.first?.stringValue
        #expect(first?.hasPrefix("apns-topic: U+0020 at position 12 of topic 'com.example chat'") == true)
    }

    @Test func aCollapseIDOverSixtyFourBytesIsRejected() throws {
        let rules = Self.rule("alert: hi\ncollapse_id: \"{{ event.data.key }}\"")
        let key = String(repeating: "é", count: 33)
        let decision = try Golden.decision(rules, Golden.event(data: #"{"key": "\#(key)"}"#))
        #expect(decision["reason"] == "InvalidRequest")
        #expect(
            decision["problems"]?.arrayValue?.first?.stringValue?.hasPrefix(
                "collapse_id: the collapse id is 66 bytes of UTF-8; APNs accepts at most 64") == true)
    }

    @Test func aDeviceWithoutAUsableTokenIsRejectedAlone() throws {
        let devices = """
            [{"token": "xyz", "environment": "production"}, {"environment": "production"},
             {"token": "\(Golden.token)", "environment": "staging"},
             {"token": "\(Golden.token)", "environment": "production"}]
            """
        let lines = try Golden.lines(Self.rule("alert: hi"), Golden.event(devices: devices))
        let decisions = try lines.map { try JSONValue(parsing: $0) }
        #expect(
            decisions.map { $0["reason"] ?? $0["status"] }
                == ["InvalidDevice", "InvalidDevice", "InvalidDevice", "send"])
        #expect(
            decisions[0]["problems"]?[0]?.stringValue?
                .hasPrefix("devices[0].token: 'x' at position 1 is not a hex digit") == true)
        #expect(decisions[1]["problems"] == ["devices[1] has no token (a hex text)"])
        #expect(
            decisions[2]["problems"]?[0]?.stringValue?
                .hasPrefix("devices[2].environment: 'staging' is not") == true)
    }

    @Test func anEventWithoutDevicesGetsOneSkip() throws {
        for devices in ["[]", "null", #""x""#] {
            let lines = try Golden.lines(Self.rule("alert: hi"), Golden.event(devices: devices))
            #expect(
                lines == [
                    #"{"rule":"r","status":"skipped","reason":"no_devices","#
                        + #""detail":"the event has no devices to send to"}"#
                ])
        }
    }
}

extension JSONValue {
    subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }
}
