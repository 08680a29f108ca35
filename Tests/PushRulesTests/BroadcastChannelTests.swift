// Events that name broadcast channels: each matching rule renders one broadcast per channel (push
// type liveactivity, the channel in apns-channel-id), beside the device requests.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct BroadcastChannelTests {
    static let rules = """
        version: 1
        rules:
          - id: score
            match: {type: game.score}
            push_type: liveactivity
            live_activity:
              event: update
              content_state: {score: "{{ event.data.score }}"}
        """

    static func event(channels: String, devices: String? = nil) -> String {
        let deviceMember = devices.map { #""devices": \#($0), "# } ?? ""
        return """
            {"id": "evt-1", "type": "game.score", "occurred_at": "2026-11-29T12:00:00Z", "app": "com.example.chat",
             \(deviceMember)"channels": \(channels), "data": {"score": "1-0"}}
            """
    }

    @Test func eachChannelGetsABroadcastAfterTheDevices() throws {
        let found = try Golden.lines(
            Self.rules,
            Self.event(
                channels: #"[{"id": "c29tZUNoYW5uZWw=", "environment": "sandbox"}]"#,
                devices: #"[{"token": "\#(Golden.token)", "environment": "production"}]"#))
        #expect(found.count == 2)
        let device = try JSONValue(parsing: found[0])
        #expect(device["url"]?.stringValue?.contains("/3/device/") == true)
        let broadcast = try JSONValue(parsing: found[1])
        #expect(broadcast["channel"] == 0)
        #expect(broadcast["url"] == "https://api.sandbox.push.apple.com/4/broadcasts/apps/com.example.chat")
        #expect(broadcast["headers"]?["apns-channel-id"] == "c29tZUNoYW5uZWw=")
        #expect(broadcast["headers"]?["apns-push-type"] == "liveactivity")
        #expect(broadcast["headers"]?["apns-topic"] == nil)
        #expect(broadcast["body"]?["aps"]?["content-state"]?["score"] == "1-0")
    }

    @Test func anEventMayNameOnlyChannels() throws {
        let decision = try Golden.decision(
            Self.rules, Self.event(channels: #"[{"id": "aMs2y8fFEe8AAPIAM4gHog==", "environment": "production"}]"#))
        #expect(decision["status"] == "send")
        #expect(decision["headers"]?["apns-channel-id"] == "aMs2y8fFEe8AAPIAM4gHog==")
    }

    @Test func aRuleThatIsNoLiveActivityIsRejectedForAChannel() throws {
        let rules = """
            version: 1
            rules:
              - id: hello
                match: {type: game.score}
                alert: Goal
            """
        let decision = try Golden.decision(
            rules, Self.event(channels: #"[{"id": "c29tZUNoYW5uZWw=", "environment": "sandbox"}]"#))
        #expect(decision["status"] == "rejected")
        #expect(decision["reason"] == "InvalidRequest")
        #expect(decision["problems"]?.compactString.contains("liveactivity") == true)
    }

    @Test func aChannelWithoutAnEnvironmentOrWithABadIDIsRejected() throws {
        let decision = try Golden.decision(Self.rules, Self.event(channels: #"[{"id": "not base64!"}]"#))
        #expect(decision["status"] == "rejected")
        #expect(decision["reason"] == "InvalidDevice")
        #expect(decision["problems"]?.compactString.contains("channels[0]") == true)
    }
}
