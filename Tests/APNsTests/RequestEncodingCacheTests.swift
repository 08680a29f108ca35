// The request keeps its payload's encoding and payload checks with the payload, shared by copies; these
// tests pin that what is cached always answers as a fresh encoding and a fresh check would.

import JSON
import Testing

@testable import APNs

@Suite struct RequestEncodingCacheTests {
    @Test func theClientsHTTP2RequestIsTheWireRequest() {
        let request = Sample.request(
            expiration: .at(1_900_000_000), collapseID: try! CollapseID("c-1"),
            payload: ["aps": ["alert": "Bonjour é"], "k": 1])
        let wire = request.wire(authorization: "a.b.c")
        let http = request.http2Request(authorizationValue: "bearer a.b.c", authority: "127.0.0.1:8443")
        #expect(http.method == wire.method)
        #expect(http.scheme == wire.scheme)
        #expect(http.authority == "127.0.0.1:8443")
        #expect(http.path == wire.path)
        #expect(http.body == wire.body)
        #expect(http.headers.map { APNsHeaderField($0.name, $0.value) } == wire.headers)
        // Values that change with every request are kept out of the HPACK table; the rest may be indexed.
        #expect(!http.isPathIndexable)
        #expect(
            http.headers.filter { !$0.isIndexable }.map(\.name) == ["apns-expiration", "apns-collapse-id", "apns-id"])
        #expect(
            http.headers.filter(\.isIndexable).map(\.name) == [
                "authorization", "apns-push-type", "apns-topic", "apns-priority",
            ])
    }

    @Test func aCopyWithAnotherPushTypeIsCheckedForThatPushType() {
        let alert = Sample.request(payload: ["aps": ["alert": "hi"]])
        #expect(alert.validate().isEmpty)
        var background = alert
        background.pushType = .background
        background.priority = .considerPower
        background.topic = Sample.topic(for: .background)
        #expect(
            Sample.summary(background.validate()) == [
                "payloadKeyNotAllowed@payload.aps.alert", "payloadMissingKey@payload.aps.content-available",
            ])
        // And back: the alert copy still has no problems.
        #expect(alert.validate().isEmpty)
    }

    @Test func settingThePayloadReencodesIt() throws {
        var request = Sample.request(payload: ["aps": ["alert": "one"]])
        let before = request
        request.payload = ["aps": ["alert": "two"], "n": -9_223_372_036_854_775_807]
        #expect(request.payloadBytes == Array(#"{"aps":{"alert":"two"},"n":-9223372036854775807}"#.utf8))
        #expect(request.wire(authorization: nil).body == request.payloadBytes)
        #expect(before.payloadBytes == Array(#"{"aps":{"alert":"one"}}"#.utf8))
        #expect(request != before)
        request.payload = before.payload
        #expect(request == before)
        #expect(request.hashValue == before.hashValue)
    }

    @Test func aPayloadMadeTooLargeByAnEditIsRefused() {
        var request = Sample.request()
        #expect(request.validate().isEmpty)
        request.payload = ["aps": ["alert": .string(String(repeating: "x", count: 4100))]]
        #expect(Sample.summary(request.validate()) == ["payloadTooLarge@payload"])
    }

    /// Every push type's suffix on an alert topic is caught (the check skips topics whose last part
    /// has no suffix's length, so each suffix must still be found).
    @Test(arguments: PushType.allCases.filter { !$0.topicSuffix.isEmpty && $0 != .mdm })
    func anAlertToAnyOtherTypesTopicIsFlagged(other: PushType) {
        let problems = Sample.request(topic: "com.example.app" + other.topicSuffix).validate()
        #expect(Sample.summary(problems) == ["topicSuffixMismatch@apns-topic"])
    }

    @Test func integersOfEveryMagnitudeEncodeAsJSONWould() {
        for value: Int64 in [0, 7, -7, 10, 99, 100, -100, 1_234_567_890, .max, .min + 1, .min] {
            #expect(JSONValue.int(value).compactString == String(value))
        }
    }
}
