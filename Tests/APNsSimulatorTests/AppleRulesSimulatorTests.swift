// The simulator answers Apple's rules as APNs would: BadPriority for a priority the push type does
// not take, BadPayload for a push the device would drop, and acceptance of everything Apple allows.

import APNs
import Testing

@testable import APNsSimulator

@Suite struct AppleRulesSimulatorTests {
    func answer(_ type: String, _ topic: String, priority: String? = nil, body: String) -> String? {
        var headers = [("apns-push-type", type), ("apns-topic", topic)]
        if let priority { headers.append(("apns-priority", priority)) }
        return reason(alertRequest(headers: headers, body: body))
    }

    @Test func priorityOneIsAcceptedWhereAppleAllowsIt() {
        #expect(answer("alert", "com.example.app", priority: "1", body: #"{"aps":{"alert":"hi"}}"#) == nil)
        #expect(answer("voip", "com.example.app.voip", priority: "1", body: #"{"call":"c1"}"#) == nil)
        #expect(
            answer(
                "widgets", "com.example.app.push-type.widgets", priority: "1",
                body: #"{"aps":{"content-changed":true}}"#)
                == nil)
        #expect(
            answer("background", "com.example.app", priority: "1", body: #"{"aps":{"content-available":1}}"#)
                == "BadPriority")
        let update = #"{"aps":{"timestamp":1,"event":"update","content-state":{"eta":3}}}"#
        #expect(
            answer("liveactivity", "com.example.app.push-type.liveactivity", priority: "1", body: update)
                == "BadPriority")
        #expect(answer("liveactivity", "com.example.app.push-type.liveactivity", priority: "5", body: update) == nil)
    }

    @Test func aLiveActivityUpdateWithoutContentStateIsABadPayload() {
        let topic = "com.example.app.push-type.liveactivity"
        #expect(answer("liveactivity", topic, body: #"{"aps":{"timestamp":1,"event":"update"}}"#) == "BadPayload")
        #expect(
            answer(
                "liveactivity", topic,
                body: #"{"aps":{"timestamp":1,"event":"update","relevance-score":50,"content-state":{}}}"#)
                == nil)
    }

    @Test func widgetPushesNeedContentChangedTrue() {
        let topic = "com.example.app.push-type.widgets"
        #expect(answer("widgets", topic, body: #"{"aps":{"content-changed":false}}"#) == "BadPayload")
        #expect(answer("controls", "com.example.app.push-type.controls", body: #"{"aps":{}}"#) == "BadPayload")
    }

    @Test func safariWebPushesAreAcceptedWithTitleBodyAndUrlArgs() {
        let flight =
            #"{"aps":{"alert":{"title":"Flight A998","body":"Boarding.","action":"View"},"url-args":["A998"]}}"#
        #expect(answer("alert", "web.com.example.site", body: flight) == nil)
        #expect(answer("alert", "web.com.example.site", body: #"{"aps":{"alert":{"title":"t"}}}"#) == "BadPayload")
    }

    /// "Don't add your own custom keys to the aps dictionary; APNs ignores custom keys" (Generating a
    /// remote notification): the sender refuses them, APNs does not.
    @Test func unknownApsKeysAreIgnoredAsApnsDoes() {
        #expect(answer("alert", "com.example.app", body: #"{"aps":{"alert":"hi","mine":1}}"#) == nil)
    }
}
