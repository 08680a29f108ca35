// The request as it goes on the wire: headers, path and body for each kind of credential, and what its
// description hides.

import APNs
import Testing

@Suite struct WireRenderingTests {
    @Test func tokenAuthRequestRendersExactlyWhatGoesOnTheWire() throws {
        let request = Sample.request(
            pushType: .alert, priority: .considerPower, expiration: .at(1_764_417_600),
            collapseID: try CollapseID("evt-9f2"), payload: ["aps": ["alert": "Bonjour é"], "k": 1])
        let wire = request.wire(authorization: "eyJhbGciOiJFUzI1NiJ9.e30.sig")
        #expect(wire.method == "POST")
        #expect(wire.scheme == "https")
        #expect(wire.authority == "api.sandbox.push.apple.com")
        #expect(wire.path == "/3/device/" + Sample.tokenHex)
        #expect(wire.url == "https://api.sandbox.push.apple.com/3/device/" + Sample.tokenHex)
        #expect(
            wire.headers == [
                APNsHeaderField("authorization", "bearer eyJhbGciOiJFUzI1NiJ9.e30.sig"),
                APNsHeaderField("apns-push-type", "alert"),
                APNsHeaderField("apns-topic", "com.example.app"),
                APNsHeaderField("apns-priority", "5"),
                APNsHeaderField("apns-expiration", "1764417600"),
                APNsHeaderField("apns-collapse-id", "evt-9f2"),
                APNsHeaderField("apns-id", "123e4567-e89b-42d3-a456-426614174000"),
            ])
        #expect(wire.body == Array(#"{"aps":{"alert":"Bonjour é"},"k":1}"#.utf8))
    }

    @Test func certificateAuthSendsNoAuthorizationAndOptionalHeadersAreLeftOut() {
        let wire = Sample.request(pushType: .voip, payload: ["call": "c1"]).wire(authorization: nil)
        #expect(wire.headers.map(\.name) == ["apns-push-type", "apns-topic", "apns-priority", "apns-id"])
        #expect(wire[header: "apns-topic"] == "com.example.app.voip")
        #expect(wire[header: "apns-priority"] == "10")
        #expect(wire[header: "authorization"] == nil)
    }

    @Test func expirationZeroIsSentAsZero() {
        let wire = Sample.request(expiration: .immediately).wire(authorization: nil)
        #expect(wire[header: "apns-expiration"] == "0")
    }

    @Test func productionGoesToTheProductionHost() {
        var request = Sample.request()
        request.environment = .production
        #expect(request.url == "https://api.push.apple.com/3/device/" + Sample.tokenHex)
        #expect(request.wire(authorization: nil).authority == "api.push.apple.com")
    }

    @Test func descriptionHidesTheProviderToken() {
        let wire = Sample.request().wire(authorization: "secret.jwt.value")
        #expect(!wire.description.contains("secret"))
        #expect(wire.description.contains("authorization: bearer <redacted>"))
    }

    @Test func validatedWireThrowsEveryProblemOrRenders() throws {
        #expect(try Sample.request().validatedWire(authorization: nil) == Sample.request().wire(authorization: nil))
        do {
            _ = try Sample.request(pushType: .background, priority: .immediately, payload: ["aps": ["alert": "x"]])
                .validatedWire(authorization: nil)
            Issue.record("an invalid request rendered")
        } catch {
            #expect(
                Sample.summary(error.problems) == [
                    "priorityNotAllowed@apns-priority", "payloadKeyNotAllowed@payload.aps.alert",
                    "payloadMissingKey@payload.aps.content-available",
                ])
        }
    }
}

@Suite struct RequestValidationTests {
    @Test func validateRememberingAnswersAsValidateDoesAndCopiesKeepTheAnswer() throws {
        let cases: [APNsRequest] = [
            Sample.request(), Sample.request(topic: "com.example app"), Sample.request(topic: ""),
            Sample.request(topic: "com.example.app.voip"), Sample.request(expiration: .at(-5)),
            Sample.request(pushType: .voip, priority: .considerPower, payload: ["call": 1]),
            Sample.request(pushType: .background, priority: .immediately, payload: ["aps": [:]]),
            Sample.request(payload: ["aps": ["alert": .string(String(repeating: "x", count: 5000)), "badge": "3"]]),
        ]
        for original in cases {
            var request = original
            let expected = Sample.summary(original.validate())
            #expect(Sample.summary(request.validateRemembering()) == expected, "\(original.topic)")
            // A copy for another device and a retry's fresh id: the same answer, from memory or not.
            var copy = request
            copy.target = .device(try DeviceToken(String(repeating: "cd", count: 32)))
            copy.apnsID = .random()
            #expect(Sample.summary(copy.validate()) == expected, "\(original.topic)")
            #expect(Sample.summary(copy.validateRemembering()) == expected, "\(original.topic)")
        }
    }

    @Test func changingAHeaderForgetsThatTheHeadersWereValid() {
        var valid = Sample.request()
        #expect(valid.validateRemembering().isEmpty)
        var topic = valid
        topic.topic = "com.example app"
        #expect(Sample.summary(topic.validate()) == ["topicInvalid@apns-topic"])
        var pushType = valid
        pushType.pushType = .voip
        #expect(Sample.summary(pushType.validate()).contains("topicSuffixMismatch@apns-topic"))
        var background = Sample.request(
            pushType: .background, priority: .considerPower,
            payload: ["aps": ["content-available": 1]])
        #expect(background.validateRemembering().isEmpty)
        background.priority = .immediately
        #expect(Sample.summary(background.validate()) == ["priorityNotAllowed@apns-priority"])
        var expiration = valid
        expiration.expiration = .at(-5)
        #expect(Sample.summary(expiration.validate()) == ["expirationInvalid@apns-expiration"])
        // The payload is checked every time whatever the headers: a new payload gets its own answer.
        var payload = valid
        payload.payload = ["aps": ["alert": "x", "custom": 1]]
        #expect(Sample.summary(payload.validate()) == ["payloadUnknownAPSKey@payload.aps.custom"])
    }

    @Test(arguments: PushType.allCases)
    func aWellFormedRequestOfEveryPushTypeHasNoProblems(type: PushType) {
        #expect(Sample.request(pushType: type, payload: validPayload(for: type)).validate().isEmpty)
    }

    @Test func reportsEveryProblemAtOnce() {
        let request = Sample.request(
            pushType: .background, topic: "com.example.app.voip", priority: .immediately, expiration: .at(-3),
            payload: ["aps": ["alert": "x", "custom": 1]])
        let problems = request.validate()
        #expect(
            Sample.summary(problems) == [
                "topicSuffixMismatch@apns-topic", "priorityNotAllowed@apns-priority",
                "expirationInvalid@apns-expiration",
                "payloadUnknownAPSKey@payload.aps.custom", "payloadKeyNotAllowed@payload.aps.alert",
                "payloadMissingKey@payload.aps.content-available",
            ])
        for problem in problems { #expect(!problem.message.isEmpty) }
    }

    @Test func topicMustCarryThePushTypesSuffix() {
        let problems = Sample.request(
            pushType: .liveactivity, topic: "com.example.app",
            payload: validPayload(for: .liveactivity)
        ).validate()
        #expect(Sample.summary(problems) == ["topicSuffixMismatch@apns-topic"])
        #expect(problems[0].message.contains("use 'com.example.app.push-type.liveactivity'"))
    }

    @Test func aBareSuffixIsNotATopic() {
        let problems = Sample.request(pushType: .voip, topic: ".voip", payload: [:]).validate()
        #expect(Sample.summary(problems) == ["topicInvalid@apns-topic"])
    }

    @Test func alertToAnotherTypesTopicIsFlagged() {
        let problems = Sample.request(topic: "com.example.app.push-type.widgets").validate()
        #expect(Sample.summary(problems) == ["topicSuffixMismatch@apns-topic"])
        #expect(problems[0].message.contains("bundle id 'com.example.app', or use push type widgets"))
    }

    @Test func mdmTopicMustBeThePushMagicTopic() {
        let problems = Sample.request(pushType: .mdm, topic: "com.example.app", payload: ["mdm": "x"]).validate()
        #expect(Sample.summary(problems) == ["topicSuffixMismatch@apns-topic"])
    }

    @Test(arguments: [
        "", "com.example app", "com.example.app\n", "com.exämple.app", "com..app", ".com.app", "com.app.", "com/app",
    ])
    func topicsABundleIDCannotBeAreRefused(topic: String) {
        let problems = Sample.request(topic: topic).validate()
        #expect(problems.count == 1)
        #expect(problems.first?.field == "apns-topic")
        #expect(problems.first?.code == (topic.isEmpty ? .topicEmpty : .topicInvalid))
    }

    @Test func topicProblemNamesTheCharacterAndPosition() {
        let problems = Sample.request(topic: "com.example app").validate()
        #expect(problems.first?.message.contains("U+0020 at position 12") == true)
    }
}

@Suite struct RequestParsingTests {
    @Test func buildsARequestFromText() throws {
        let request = try APNsRequest.parse(
            deviceToken: "<" + Sample.tokenHex.uppercased() + ">", environment: "development",
            bundleOrTopic: "com.example.app", pushType: "voip", priority: "10", expiration: "0",
            collapseID: "c", apnsID: "123E4567-E89B-42D3-A456-426614174000", payloadJSON: Array(#"{"x":1}"#.utf8))
        #expect(request.deviceToken == Sample.token)
        #expect(request.environment == .sandbox)
        #expect(request.topic == "com.example.app.voip")
        #expect(request.pushType == .voip)
        #expect(request.priority == .immediately)
        #expect(request.expiration == .immediately)
        #expect(request.collapseID?.value == "c")
        #expect(request.apnsID == Sample.apnsID)
        #expect(request.payload == ["x": 1])
    }

    @Test func defaultsAreProductionAlertDefaultPriorityAndAFreshID() throws {
        let first = try APNsRequest.parse(
            deviceToken: Sample.tokenHex, bundleOrTopic: "com.example.app",
            payload: ["aps": ["alert": "x"]])
        let second = try APNsRequest.parse(
            deviceToken: Sample.tokenHex, bundleOrTopic: "com.example.app",
            payload: ["aps": ["alert": "x"]])
        #expect(first.environment == .production)
        #expect(first.pushType == .alert)
        #expect(first.priority == .immediately)
        #expect(first.expiration == .none)
        #expect(first.apnsID != second.apnsID)
        let background = try APNsRequest.parse(
            deviceToken: Sample.tokenHex, bundleOrTopic: "com.example.app",
            pushType: "background", payload: ["aps": ["content-available": 1]])
        #expect(background.priority == .considerPower)
    }

    @Test func collectsTheProblemsOfEveryFieldTogether() {
        do {
            _ = try APNsRequest.parse(
                deviceToken: "12345", environment: "staging", bundleOrTopic: "com.example.app", pushType: "background",
                priority: "high", expiration: "-1", collapseID: String(repeating: "x", count: 65), apnsID: "nope",
                payloadJSON: Array(#"{"aps":{"alert":"x"},}"#.utf8))
            Issue.record("an invalid request was built")
        } catch {
            #expect(
                Sample.summary(error.problems) == [
                    "deviceTokenOddLength@device-token", "environmentUnknown@environment",
                    "priorityInvalid@apns-priority", "expirationInvalid@apns-expiration",
                    "collapseIDTooLong@apns-collapse-id", "apnsIDInvalid@apns-id", "payloadInvalidJSON@payload",
                ])
            #expect(error.problems.last?.message.contains("line 1, column") == true)
        }
    }

    @Test func crossFieldChecksStillRunWhenATokenIsBad() {
        do {
            _ = try APNsRequest.parse(
                deviceToken: "", bundleOrTopic: "com.example.app", pushType: "background",
                priority: "10", payload: ["aps": ["content-available": 1]])
            Issue.record("an invalid request was built")
        } catch {
            #expect(
                Sample.summary(error.problems) == [
                    "deviceTokenEmpty@device-token", "priorityNotAllowed@apns-priority",
                ])
        }
    }

    @Test func anUnknownPushTypeSkipsTheChecksThatDependOnIt() {
        do {
            _ = try APNsRequest.parse(
                deviceToken: Sample.tokenHex, bundleOrTopic: "com.example.app",
                pushType: "banner", payload: ["anything": 1])
            Issue.record("an invalid request was built")
        } catch {
            #expect(Sample.summary(error.problems) == ["pushTypeUnknown@apns-push-type"])
        }
    }
}
