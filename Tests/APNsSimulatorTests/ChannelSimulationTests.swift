// The simulator's broadcast channels: the management API (create, read, delete, list) and broadcasts
// checked against the channels it created, each refusal with Apple's reason.

import APNs
import JSON
import Testing

@testable import APNsSimulator

@Suite struct ChannelSimulationTests {
    let validator = makeValidator()

    func manage(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: String = "",
        validator: RequestValidator? = nil
    ) -> ChannelManagementAnswer {
        var connection = ConnectionAuthentication()
        return (validator ?? self.validator).answerChannelManagement(
            IncomingRequest(method: method, path: path, headers: headers, body: Array(body.utf8)),
            connection: &connection, now: 1_800_000_000)
    }

    func create(policy: Int = 1) throws -> String {
        let answer = manage(
            "POST", "/1/apps/com.example.app/channels",
            body: #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#)
        #expect(answer.status == 201)
        return try #require(answer.channelID)
    }

    func broadcast(
        channel: String?, pushType: String = "liveactivity", extra: [(String, String)] = [],
        path: String = "/4/broadcasts/apps/com.example.app"
    ) -> ValidationVerdict {
        var headers: [(String, String)] = [("apns-push-type", pushType)]
        if let channel { headers.append(("apns-channel-id", channel)) }
        return verdict(
            IncomingRequest(
                method: "POST", path: path, headers: headers + extra,
                body: Array(#"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#.utf8)), validator)
    }

    @Test func aCreatedChannelCanBeReadListedAndDeleted() throws {
        let id = try create(policy: 0)
        #expect((try? ChannelID(id)) != nil)
        let read = manage("GET", "/1/apps/com.example.app/channels", headers: [("apns-channel-id", id)])
        #expect(read.status == 200)
        let config = try JSONValue(parsing: read.body ?? [])
        #expect(config["message-storage-policy"]?.intValue == 0)
        #expect(config["push-type"]?.stringValue == "LiveActivity")
        let list = manage("GET", "/1/apps/com.example.app/all-channels")
        #expect(try JSONValue(parsing: list.body ?? [])["channels"] == .array([.string(id)]))
        #expect(manage("DELETE", "/1/apps/com.example.app/channels", headers: [("apns-channel-id", id)]).status == 204)
        let again = manage("GET", "/1/apps/com.example.app/channels", headers: [("apns-channel-id", id)])
        #expect(again.reason == .channelNotRegistered)
        #expect(again.status == 400)
    }

    @Test func managementRefusalsCarryApplesReasons() {
        let path = "/1/apps/com.example.app/channels"
        #expect(
            manage("POST", path, body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#).reason
                == badMessageStoragePolicyReason)
        #expect(
            manage("POST", path, body: #"{"message-storage-policy":1,"push-type":"Alert"}"#).reason
                == .invalidPushType)
        #expect(manage("GET", path).reason == .missingChannelId)
        #expect(manage("GET", path, headers: [("apns-channel-id", "no such id!")]).reason == .badChannelId)
        #expect(manage("PUT", path).reason == .methodNotAllowed)
        #expect(manage("GET", "/1/apps/com.example.app/other").reason == .badPath)
        let id = "aMs2y8fFEe8AAPIAM4gHog=="
        #expect(manage("DELETE", path, headers: [("apns-channel-id", id)]).reason == .channelNotRegistered)
        let echoed = manage("GET", path, headers: [("apns-request-id", "123e4567-e89b-42d3-a456-426614174000")])
        #expect(echoed.requestID == "123e4567-e89b-42d3-a456-426614174000")
    }

    @Test func anAppHasAtMostItsLimitOfChannels() {
        let small = RequestValidator(
            authentication: .none, devices: DeviceStates(), allowedBundles: [], startMilliseconds: 0,
            channels: ChannelRegistry(limitPerApp: 1))
        let body = #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#
        #expect(manage("POST", "/1/apps/a.b/channels", body: body, validator: small).status == 201)
        #expect(
            manage("POST", "/1/apps/a.b/channels", body: body, validator: small).reason == .cannotCreateChannelConfig)
        #expect(manage("POST", "/1/apps/c.d/channels", body: body, validator: small).status == 201)
    }

    @Test func aBroadcastOnACreatedChannelIsAccepted() throws {
        let id = try create()
        guard case .accepted(let accepted) = broadcast(channel: id) else {
            Issue.record("refused: \(String(describing: broadcast(channel: id).reason))")
            return
        }
        #expect(accepted.channelID == id)
        #expect(accepted.topic == "com.example.app.push-type.liveactivity")
        #expect(accepted.deviceToken.isEmpty)
    }

    @Test func broadcastRefusalsCarryApplesReasons() throws {
        let stored = try create(policy: 1)
        let unstored = try create(policy: 0)
        #expect(broadcast(channel: nil).reason == .missingChannelId)
        #expect(broadcast(channel: "not base64!").reason == .badChannelId)
        #expect(broadcast(channel: "aMs2y8fFEe8AAPIAM4gHog==").reason == .channelNotRegistered)
        #expect(broadcast(channel: stored, pushType: "alert").reason == .invalidPushType)
        #expect(broadcast(channel: stored, extra: [("apns-priority", "7")]).reason == .badPriority)
        #expect(broadcast(channel: stored, extra: [("apns-priority", "5")]).reason == nil)
        #expect(broadcast(channel: stored, extra: [("apns-expiration", "1900000000")]).reason == nil)
        #expect(broadcast(channel: unstored, extra: [("apns-expiration", "1900000000")]).reason == .badExpirationDate)
        #expect(broadcast(channel: unstored, extra: [("apns-expiration", "0")]).reason == nil)
        #expect(broadcast(channel: stored, path: "/4/broadcasts/apps/").reason == .badPath)
        // A channel belongs to its app.
        #expect(
            broadcast(channel: stored, path: "/4/broadcasts/apps/com.example.other").reason == .channelNotRegistered)
    }
}
