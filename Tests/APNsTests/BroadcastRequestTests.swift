// Broadcast requests (Apple, "Sending broadcast push notification requests to APNs"): the path, the
// headers that replace topic and apns-id, the push type rule, and channel ids.

import JSON
import Testing

@testable import APNs

@Suite struct BroadcastRequestTests {
    static let channel = try! ChannelID("c29tZUNoYW5uZWw=")
    static let payload: JSONValue = [
        "aps": ["event": "update", "timestamp": 1_700_000_000, "content-state": ["score": "1-0"]]
    ]

    static func broadcast(priority: APNsPriority? = nil) -> APNsRequest {
        APNsRequest(
            channel: channel, environment: .sandbox, bundle: "com.example.app", priority: priority,
            apnsID: Sample.apnsID, payload: payload)
    }

    @Test func aBroadcastGoesToTheAppsBroadcastPathWithItsChannelAndNoTopic() throws {
        let request = Self.broadcast()
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.topic == "com.example.app.push-type.liveactivity")
        #expect(request.bundle == "com.example.app")
        #expect(request.channelID == Self.channel)
        #expect(request.deviceToken == nil)
        #expect(request.validate().isEmpty)
        let wire = request.wire(authorization: "jwt")
        #expect(wire.path == "/4/broadcasts/apps/com.example.app")
        #expect(
            wire.headers.map(\.name) == [
                "authorization", "apns-push-type", "apns-channel-id", "apns-priority", "apns-request-id",
            ])
        #expect(wire.headers.first { $0.name == "apns-channel-id" }?.value == "c29tZUNoYW5uZWw=")
        #expect(wire.headers.first { $0.name == "apns-push-type" }?.value == "liveactivity")
        #expect(wire.headers.first { $0.name == "apns-request-id" }?.value == Sample.apnsID.string)
    }

    @Test func thePackedHTTP2RequestMatchesTheWireRendering() {
        let request = Self.broadcast(priority: .considerPower)
        let wire = request.wire(authorization: "jwt")
        let http = request.http2Request(authorizationValue: "bearer jwt", authority: "127.0.0.1:8443")
        #expect(http.path == wire.path)
        #expect(http.body == wire.body)
        #expect(http.headers.map { APNsHeaderField($0.name, $0.value) } == wire.headers)
        #expect(http.headers.filter { !$0.isIndexable }.map(\.name) == ["apns-request-id"])
    }

    @Test func aDeviceRequestIsUnchangedAndSwitchingTargetsRechecksThePushType() throws {
        var request = Sample.request()
        #expect(request.path.hasPrefix("/3/device/"))
        #expect(request.wire(authorization: nil).headers.contains { $0.name == "apns-topic" })
        #expect(request.validateRemembering().isEmpty)
        request.target = .channel(Self.channel)
        let problems = request.validate()
        #expect(problems.map(\.field) == ["apns-push-type"])
        #expect(problems.first?.message.contains("liveactivity") == true)
    }

    @Test func parsingABroadcastDefaultsToLiveActivityAndReportsEveryProblem() throws {
        let request = try APNsRequest.parse(
            channelID: " c29tZUNoYW5uZWw= ", environment: "sandbox", bundleOrTopic: "com.example.app",
            payloadJSON: Array(#"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#.utf8))
        #expect(request.pushType == .liveactivity)
        #expect(request.channelID?.value == "c29tZUNoYW5uZWw=")
        #expect(request.environment == .sandbox)

        let invalid = #expect(throws: APNsInvalidRequest.self) {
            try APNsRequest.parse(
                channelID: "not base64!", bundleOrTopic: "com.example.app", pushType: "alert",
                payloadJSON: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        }
        let fields = invalid?.problems.map(\.field) ?? []
        #expect(fields.contains("apns-channel-id"))
        #expect(fields.contains("apns-push-type"))
    }

    @Test func channelIDsAreBase64() throws {
        #expect(try ChannelID("aMs2y8fFEe8AAPIAM4gHog==").value == "aMs2y8fFEe8AAPIAM4gHog==")
        #expect(throws: APNsRequestError.self) { try ChannelID("") }
        #expect(throws: APNsRequestError.self) { try ChannelID("abc=def") }
        #expect(throws: APNsRequestError.self) { try ChannelID("a b") }
    }

    @Test func aBroadcastAnswerEchoesItsRequestID() {
        let response = APNsResponse(
            status: 200, headers: [APNsHeaderField("apns-request-id", Sample.apnsID.string)], body: [])
        #expect(response.apnsID == Sample.apnsID)
        let gone = APNsResponse(
            status: 400, headers: [], body: Array(#"{"reason":"ChannelNotRegistered"}"#.utf8))
        #expect(gone.reason == .channelNotRegistered)
        // A channel that is gone is no dead device token.
        #expect(gone.reasonClass == .permanent)
    }
}
