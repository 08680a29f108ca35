// Decoding an event's broadcast channels (`channels: [{id, environment}]`) beside or instead of devices.

import APNs
import JSON
import Testing

@testable import Worker

@Suite struct EventChannelsDecoderTests {
    func decode(_ members: String) throws(EventDecodingError) -> PushEvent {
        try PushEventDecoder.decode(Array(#"{"id":"e","type":"t","app":"com.example.app",\#(members)}"#.utf8))
    }

    @Test func channelsComeBesideDevicesOrInsteadOfThem() throws {
        let both = try decode(
            #""devices":[{"token":"0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a","environment":"production"}],"#
                + #""channels":[{"id":"c29tZUNoYW5uZWw=","environment":"development"}]"#)
        #expect(both.devices.count == 1)
        #expect(both.channels == [EventDevice(token: "", environment: "sandbox", channelID: "c29tZUNoYW5uZWw=")])
        let only = try decode(#""channels":[{"id":"c29tZUNoYW5uZWw=","environment":"production"}]"#)
        #expect(only.devices.isEmpty)
        #expect(only.channels.count == 1)
    }

    @Test(arguments: [
        (#""channels":[]"#, "channels is empty"),
        (#""channels":{}"#, "channels must be an array"),
        (#""channels":[{"id":"not base64!","environment":"production"}]"#, "$.channels[0].id"),
        (#""channels":[{"id":"c29tZUNoYW5uZWw="}]"#, "environment is missing at $.channels[0]"),
        (#""other":1"#, "devices is missing"),
    ])
    func badChannelsAreSchemaViolations(members: String, message: String) {
        do {
            _ = try decode(members)
            Issue.record("decoded \(members)")
        } catch {
            #expect(error.kind == .schemaViolation)
            #expect(error.description.contains(message), "\(error)")
        }
    }
}

@Suite struct ParkedChannelsTests {
    @Test func aParkedEventKeepsOnlyTheWaitingDevicesAndChannels() throws {
        let event = Array(
            (#"{"id":"e","type":"t","app":"com.example.app","devices":[{"token":"0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a","environment":"production"}],"#
                + #""channels":[{"id":"c29tZUNoYW5uZWw=","environment":"production"},"#
                + #"{"id":"aMs2y8fFEe8AAPIAM4gHog==","environment":"production"}]}"#).utf8)
        let waiting = [EventDevice(token: "", environment: "production", channelID: "aMs2y8fFEe8AAPIAM4gHog==")]
        let parked = try PushEventDecoder.decode(Pipeline.event(event, keeping: waiting))
        #expect(parked.devices.isEmpty)
        #expect(parked.channels.map(\.channelID) == ["aMs2y8fFEe8AAPIAM4gHog=="])

        let deviceOnly = try PushEventDecoder.decode(
            Pipeline.event(
                event,
                keeping: [
                    EventDevice(
                        token: "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a",
                        environment: "production")
                ]))
        #expect(deviceOnly.devices.map(\.token) == ["0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a"])
        #expect(deviceOnly.channels.isEmpty)
    }
}
