// The simulator's request checks, one rule at a time, against Apple's status and reason.

import APNs
import Testing

@testable import APNsSimulator

let goodToken = String(repeating: "ab", count: 32)

/// A valid alert request; tests change one thing at a time.
func alertRequest(
    method: String = "POST", path: String? = nil, headers: [(String, String)]? = nil,
    body: String = #"{"aps":{"alert":"hi"}}"#
) -> IncomingRequest {
    IncomingRequest(
        method: method, path: path ?? "/3/device/" + goodToken,
        headers: headers ?? [("apns-push-type", "alert"), ("apns-topic", "com.example.app")],
        body: Array(body.utf8))
}

func makeValidator(
    devices: DeviceStates = DeviceStates(), allowedBundles: Set<String> = [],
    authentication: RequestValidator.Authentication = .none
) -> RequestValidator {
    RequestValidator(
        authentication: authentication, devices: devices, allowedBundles: allowedBundles,
        startMilliseconds: 1_700_000_000_000)
}

func verdict(_ request: IncomingRequest, _ validator: RequestValidator = makeValidator()) -> ValidationVerdict {
    var connection = ConnectionAuthentication()
    return validator.validate(request, connection: &connection, now: 1_800_000_000)
}

func reason(_ request: IncomingRequest, _ validator: RequestValidator = makeValidator()) -> String? {
    verdict(request, validator).reason?.rawValue
}

@Suite struct RequestValidatorTests {
    @Test func acceptsAValidAlertAndKeepsTheTokenLowercase() {
        let upper = alertRequest(path: "/3/device/" + goodToken.uppercased())
        guard case .accepted(let accepted) = verdict(upper) else {
            Issue.record("expected acceptance, got \(verdict(upper))")
            return
        }
        #expect(accepted.deviceToken == goodToken)
        #expect(accepted.pushType == .alert)
        #expect(accepted.topic == "com.example.app")
        #expect(accepted.apnsID == nil)
    }

    @Test func onlyPostIsAllowed() {
        #expect(reason(alertRequest(method: "GET")) == "MethodNotAllowed")
        #expect(reason(alertRequest(method: "PUT")) == "MethodNotAllowed")
        #expect(APNsErrorReason.methodNotAllowed.httpStatus == 405)
    }

    @Test func pathMustBeTheDevicePath() {
        #expect(reason(alertRequest(path: "/")) == "BadPath")
        #expect(reason(alertRequest(path: "/3/devices/" + goodToken)) == "BadPath")
        #expect(reason(alertRequest(path: "/3/device/" + goodToken + "/x")) == "BadPath")
        #expect(reason(alertRequest(path: "/3/device/")) == "MissingDeviceToken")
    }

    @Test func deviceTokenMustBeHexOfATokenLength() {
        #expect(reason(alertRequest(path: "/3/device/" + String(repeating: "zz", count: 32))) == "BadDeviceToken")
        #expect(reason(alertRequest(path: "/3/device/abcd")) == "BadDeviceToken")
        #expect(reason(alertRequest(path: "/3/device/" + goodToken + "a")) == "BadDeviceToken")
    }

    @Test func aRepeatedHeaderIsDuplicateHeaders() {
        let request = alertRequest(headers: [
            ("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-topic", "com.example.app"),
        ])
        #expect(request.duplicateHeaderName == "apns-topic")
        #expect(reason(request) == "DuplicateHeaders")
    }

    @Test func pushTypeMustBeOneApnsKnows() {
        #expect(reason(alertRequest(headers: [("apns-topic", "com.example.app")])) == "InvalidPushType")
        #expect(
            reason(alertRequest(headers: [("apns-push-type", "banner"), ("apns-topic", "com.example.app")]))
                == "InvalidPushType")
    }

    @Test func topicIsRequiredAndMustCarryThePushTypesSuffix() {
        #expect(reason(alertRequest(headers: [("apns-push-type", "alert")])) == "MissingTopic")
        let voipWithoutSuffix = alertRequest(headers: [("apns-push-type", "voip"), ("apns-topic", "com.example.app")])
        #expect(reason(voipWithoutSuffix) == "BadTopic")
        let voip = alertRequest(headers: [("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")])
        #expect(reason(voip) == nil)
        let badCharacters = alertRequest(headers: [("apns-push-type", "alert"), ("apns-topic", "com example")])
        #expect(reason(badCharacters) == "BadTopic")
    }

    @Test func topicOutsideTheAllowedBundlesIsDisallowed() {
        let validator = makeValidator(allowedBundles: ["com.example.other"])
        #expect(reason(alertRequest(), validator) == "TopicDisallowed")
        let voip = alertRequest(headers: [("apns-push-type", "voip"), ("apns-topic", "com.example.other.voip")])
        #expect(reason(voip, validator) == nil)
    }

    @Test func priorityMustBeAllowedForThePushType() {
        func withPriority(_ type: String, _ topic: String, _ priority: String) -> String? {
            reason(
                alertRequest(
                    headers: [("apns-push-type", type), ("apns-topic", topic), ("apns-priority", priority)],
                    body: #"{"aps":{"content-available":1}}"#))
        }
        #expect(withPriority("alert", "com.example.app", "10") == nil)
        #expect(withPriority("alert", "com.example.app", "5") == nil)
        #expect(withPriority("alert", "com.example.app", "7") == "BadPriority")
        #expect(withPriority("alert", "com.example.app", "high") == "BadPriority")
        #expect(withPriority("background", "com.example.app", "10") == "BadPriority")
        #expect(withPriority("background", "com.example.app", "5") == nil)
        // Apple states no priority rule for voip; liveactivity takes 5 or 10 and pushtotalk only 10.
        #expect(withPriority("voip", "com.example.app.voip", "5") == nil)
        #expect(withPriority("pushtotalk", "com.example.app.voip-ptt", "5") == "BadPriority")
    }

    @Test func expirationMustBeWholeSeconds() {
        func withExpiration(_ value: String) -> String? {
            reason(
                alertRequest(headers: [
                    ("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-expiration", value),
                ]))
        }
        #expect(withExpiration("0") == nil)
        #expect(withExpiration("1900000000") == nil)
        #expect(withExpiration("soon") == "BadExpirationDate")
        #expect(withExpiration("-5") == "BadExpirationDate")
        #expect(withExpiration("") == "BadExpirationDate")
    }

    @Test func collapseIdIsAtMost64Bytes() {
        func withCollapseID(_ value: String) -> String? {
            reason(
                alertRequest(headers: [
                    ("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-collapse-id", value),
                ]))
        }
        #expect(withCollapseID(String(repeating: "c", count: 64)) == nil)
        #expect(withCollapseID(String(repeating: "c", count: 65)) == "BadCollapseId")
        // 22 three-byte characters: 22 characters but 66 bytes.
        #expect(withCollapseID(String(repeating: "語", count: 22)) == "BadCollapseId")
    }

    @Test func apnsIdMustBeAUUIDAndIsEchoedWhenValid() {
        func request(_ id: String) -> IncomingRequest {
            alertRequest(headers: [("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-id", id)])
        }
        #expect(reason(request("not-a-uuid")) == "BadMessageId")
        #expect(reason(request("123e4567e89b42d3a456426614174000")) == "BadMessageId")
        let id = "123e4567-e89b-42d3-a456-426614174000"
        guard case .accepted(let accepted) = verdict(request(id)) else {
            Issue.record("a valid apns-id should be accepted")
            return
        }
        #expect(accepted.apnsID == id)
        // A rejection for another reason still carries the client's valid id.
        let rejected = verdict(
            alertRequest(
                method: "GET",
                headers: [("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-id", id)]))
        #expect(rejected == .rejected(.methodNotAllowed, apnsID: id, timestamp: nil))
    }

    @Test func payloadMustBePresentAndWithinThePushTypesLimit() {
        #expect(reason(alertRequest(body: "")) == "PayloadEmpty")
        func padded(to size: Int) -> String {
            let skeleton = #"{"aps":{"alert":""}}"#
            return #"{"aps":{"alert":""#.appending(String(repeating: "x", count: size - skeleton.utf8.count)) + #""}}"#
        }
        #expect(padded(to: 4096).utf8.count == 4096)
        #expect(reason(alertRequest(body: padded(to: 4096))) == nil)
        #expect(reason(alertRequest(body: padded(to: 4097))) == "PayloadTooLarge")
        #expect(APNsErrorReason.payloadTooLarge.httpStatus == 413)
        let voipHeaders = [("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")]
        #expect(reason(alertRequest(headers: voipHeaders, body: padded(to: 5120))) == nil)
        #expect(reason(alertRequest(headers: voipHeaders, body: padded(to: 5121))) == "PayloadTooLarge")
    }

    @Test func payloadMustBeAJSONObjectWithAnApsDictionary() {
        #expect(reason(alertRequest(body: "{not json")) == "BadPayload")
        #expect(reason(alertRequest(body: "[1,2]")) == "BadPayload")
        #expect(reason(alertRequest(body: #"{"data":1}"#)) == "BadPayload")
        #expect(reason(alertRequest(body: #"{"aps":"hi"}"#)) == "BadPayload")
        // Push types whose payload goes to the app as is need no aps.
        let voip = alertRequest(
            headers: [("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")],
            body: #"{"call":"c1"}"#)
        #expect(reason(voip) == nil)
    }

    @Test func listedDeviceStatesGetTheirAnswers() {
        let unregistered = String(repeating: "01", count: 32)
        let unregisteredSince = String(repeating: "02", count: 32)
        let bad = String(repeating: "03", count: 32)
        let otherApp = String(repeating: "04", count: 32)
        var devices = DeviceStates()
        devices.unregistered = [unregistered: nil, unregisteredSince: 1_650_000_000_123]
        devices.badTokens = [bad]
        devices.bundleByToken = [otherApp: "com.example.other"]
        let validator = makeValidator(devices: devices)

        #expect(
            verdict(alertRequest(path: "/3/device/" + unregistered), validator)
                == .rejected(.unregistered, apnsID: nil, timestamp: 1_700_000_000_000))
        #expect(
            verdict(alertRequest(path: "/3/device/" + unregisteredSince), validator)
                == .rejected(.unregistered, apnsID: nil, timestamp: 1_650_000_000_123))
        #expect(reason(alertRequest(path: "/3/device/" + bad), validator) == "BadDeviceToken")
        #expect(reason(alertRequest(path: "/3/device/" + otherApp), validator) == "DeviceTokenNotForTopic")
        let toItsOwnApp = alertRequest(
            path: "/3/device/" + otherApp, headers: [("apns-push-type", "alert"), ("apns-topic", "com.example.other")])
        #expect(reason(toItsOwnApp, validator) == nil)
        #expect(APNsErrorReason.unregistered.httpStatus == 410)
    }

    @Test func rateBasedUnregisteredTokensAreStablePerToken() {
        var devices = DeviceStates()
        devices.unregisteredRate = 0.25
        devices.badTokenRate = 0.10
        let validator = makeValidator(devices: devices)
        var unregistered = 0
        var bad = 0
        var firstAnswers: [String?] = []
        for index in 0..<2000 {
            let token = String(repeating: "0", count: 56) + String(format8Hex: UInt32(index))
            let answer = reason(alertRequest(path: "/3/device/" + token), validator)
            firstAnswers.append(answer)
            if answer == "Unregistered" { unregistered += 1 }
            if answer == "BadDeviceToken" { bad += 1 }
        }
        #expect((400...600).contains(unregistered), "about 25% of 2000, got \(unregistered)")
        #expect((140...260).contains(bad), "about 10% of 2000, got \(bad)")
        // A second pass, with a fresh validator, gives every token the same answer.
        let again = makeValidator(devices: devices)
        for index in 0..<2000 {
            let token = String(repeating: "0", count: 56) + String(format8Hex: UInt32(index))
            #expect(reason(alertRequest(path: "/3/device/" + token), again) == firstAnswers[index])
        }
    }
}

extension String {
    /// Eight lowercase hex digits.
    init(format8Hex value: UInt32) {
        let digits = String(value, radix: 16)
        self = String(repeating: "0", count: 8 - digits.count) + digits
    }
}
