// Each rule the validator takes from an Apple page, with a case Apple accepts and one it refuses; the
// page is named beside the rule in the source (PushType.swift, APNsPayload+PushTypes.swift).

import APNs
import JSON
import Testing

@Suite struct ApplePriorityRulesTests {
    /// "Sending notification requests to APNs": 10, 5 and 1 for any request, narrowed only for
    /// background (5), liveactivity (5 or 10, ActivityKit page) and pushtotalk (10, Push to Talk).
    @Test(arguments: PushType.allCases)
    func priorityOneIsAllowedUnlessApplesPageForThePushTypeNarrowsIt(type: PushType) {
        let problems = Sample.request(pushType: type, priority: .lowest, payload: validPayload(for: type)).validate()
        let narrowed: Set<PushType> = [.background, .liveactivity, .pushtotalk]
        #expect(problems.contains { $0.code == .priorityNotAllowed } == narrowed.contains(type), "\(type): \(problems)")
    }

    @Test func backgroundIsOnlyFive() {
        for priority in [APNsPriority.immediately, .lowest] {
            let problems = Sample.request(
                pushType: .background, priority: priority, payload: validPayload(for: .background)
            )
            .validate()
            #expect(Sample.summary(problems) == ["priorityNotAllowed@apns-priority"])
        }
    }

    @Test func liveActivitiesTakeFiveOrTen() {
        let payload = validPayload(for: .liveactivity)
        #expect(Sample.request(pushType: .liveactivity, priority: .considerPower, payload: payload).validate().isEmpty)
        let problems = Sample.request(pushType: .liveactivity, priority: .lowest, payload: payload).validate()
        #expect(problems.first?.message == "priority 1 is not allowed for liveactivity pushes; use 10 or 5")
    }

    @Test func pushToTalkIsOnlyTen() {
        let payload = validPayload(for: .pushtotalk)
        #expect(Sample.request(pushType: .pushtotalk, priority: .immediately, payload: payload).validate().isEmpty)
        #expect(!Sample.request(pushType: .pushtotalk, priority: .considerPower, payload: payload).validate().isEmpty)
    }

    @Test func withoutAPriorityTheRequestCarriesApplesDefault() {
        #expect(Sample.request(pushType: .voip, payload: validPayload(for: .voip)).priority == .immediately)
        #expect(
            Sample.request(pushType: .background, payload: validPayload(for: .background)).priority == .considerPower)
    }

    @Test func locationAndFileProviderNeedTokenAuthentication() {
        #expect(PushType.allCases.filter(\.requiresTokenAuthentication) == [.fileprovider, .location])
    }
}

@Suite struct AppleRelevanceScoreTests {
    /// "Generating a remote notification", Table 1: 0 to 1, "any Double value" for a Live Activity.
    @Test func liveActivitiesTakeAnyNumber() {
        for score: JSONValue in [50, 100, 0.5, 1_000.25, -3] {
            var aps = validPayload(for: .liveactivity).objectValue!["aps"]!.objectValue!
            aps["relevance-score"] = score
            #expect(APNsPayload.validate(["aps": .object(aps)], pushType: .liveactivity).isEmpty, "\(score)")
        }
        var aps = validPayload(for: .liveactivity).objectValue!["aps"]!.objectValue!
        aps["relevance-score"] = "high"
        #expect(
            Sample.summary(APNsPayload.validate(["aps": .object(aps)], pushType: .liveactivity)) == [
                "payloadWrongType@payload.aps.relevance-score"
            ])
    }

    @Test func notificationsStayBetweenZeroAndOne() {
        #expect(APNsPayload.validate(["aps": ["alert": "x", "relevance-score": 0.75]], pushType: .alert).isEmpty)
        #expect(
            Sample.summary(APNsPayload.validate(["aps": ["alert": "x", "relevance-score": 50]], pushType: .alert)) == [
                "payloadValueOutOfRange@payload.aps.relevance-score"
            ])
    }
}

@Suite struct AppleLiveActivityRulesTests {
    static func problems(_ aps: JSONValue) -> [String] {
        Sample.summary(APNsPayload.validate(["aps": aps], pushType: .liveactivity))
    }

    @Test func everyEventCarriesContentState() {
        for event: JSONValue in ["start", "update", "end"] {
            #expect(
                Self.problems(["timestamp": 1, "event": event]).contains("payloadMissingKey@payload.aps.content-state"),
                "\(event)")
        }
        #expect(Self.problems(["timestamp": 1, "event": "end", "content-state": ["eta": 0]]).isEmpty)
    }

    @Test func aStartNeedsAnAlert() {
        let start: JSONValue = [
            "timestamp": 1, "event": "start", "content-state": ["eta": 3], "attributes-type": "Delivery",
            "attributes": ["order": "o1"],
        ]
        #expect(Self.problems(start) == ["payloadMissingKey@payload.aps.alert"])
    }

    /// Apple's own start example: localized title and body dictionaries and a sound inside the alert.
    @Test func applesStartExamplePasses() {
        let start: JSONValue = [
            "timestamp": 1234, "event": "start", "content-state": ["currentHealthLevel": 100],
            "attributes-type": "AdventureAttributes", "attributes": ["hero": ["name": "Power Panda"]],
            "alert": [
                "title": ["loc-key": "%@ is on an adventure!", "loc-args": ["Power Panda"]],
                "body": ["loc-key": "%@ found a sword!", "loc-args": ["Power Panda"]],
                "sound": "chime.aiff",
            ],
        ]
        #expect(Self.problems(start).isEmpty)
        var broken = start.objectValue!
        broken["alert"] = ["title": ["loc-args": [1]], "sound": 3]
        #expect(
            Self.problems(.object(broken)) == [
                "payloadMissingKey@payload.aps.alert.title.loc-key", "payloadWrongType@payload.aps.alert.sound",
            ])
    }

    @Test func inputPushTokenAndChannelBelongToAStart() {
        let start: JSONValue = [
            "timestamp": 1, "event": "start", "content-state": ["eta": 3], "attributes-type": "Delivery",
            "attributes": ["order": "o1"], "alert": ["title": "Started"], "input-push-token": 1,
        ]
        #expect(Self.problems(start).isEmpty)
        var channelStart = start.objectValue!
        channelStart["input-push-token"] = nil
        channelStart["input-push-channel"] = "dHN0LXNyY2gtY2hubA=="
        #expect(Self.problems(.object(channelStart)).isEmpty)
        let inputs: [(String, JSONValue)] = [("input-push-token", 1), ("input-push-channel", "dHN0LXNyY2gtY2hubA==")]
        for (key, value) in inputs {
            var update = (["timestamp": 1, "event": "update", "content-state": ["eta": 3]] as JSONValue).objectValue!
            update[key] = value
            #expect(Self.problems(.object(update)) == ["payloadKeyNotAllowed@payload.aps.\(key)"])
        }
    }

    /// Table 1 types the dates as Number (UNIX timestamp); ActivityKit removes an ended activity at
    /// once for a past dismissal-date.
    @Test func datesAreNumbersOfSecondsAndMayBeInThePast() {
        let update: JSONValue = [
            "timestamp": 1_685_952_000.5, "event": "end", "content-state": [:], "dismissal-date": 1_663_177_260,
            "stale-date": 1_685_955_600,
        ]
        #expect(Self.problems(update).isEmpty)
        #expect(
            Self.problems(["timestamp": 1, "event": "end", "content-state": [:], "stale-date": "tomorrow"]) == [
                "payloadWrongType@payload.aps.stale-date"
            ])
    }
}

@Suite struct AppleWidgetAndControlRulesTests {
    /// "set the content-changed property to true" (WidgetKit); the controls request carries the same.
    @Test(arguments: [PushType.widgets, .controls])
    func contentChangedMustBeTrue(type: PushType) {
        #expect(APNsPayload.validate(["aps": ["content-changed": true]], pushType: type).isEmpty)
        #expect(
            Sample.summary(APNsPayload.validate(["aps": [:]], pushType: type)) == [
                "payloadMissingKey@payload.aps.content-changed"
            ])
        #expect(
            Sample.summary(APNsPayload.validate(["aps": ["content-changed": false]], pushType: type)) == [
                "payloadValueOutOfRange@payload.aps.content-changed"
            ])
        #expect(
            Sample.summary(APNsPayload.validate(["aps": ["content-changed": 1]], pushType: type)) == [
                "payloadWrongType@payload.aps.content-changed"
            ])
    }

    @Test func priorityOneIsAcceptedForWidgets() {
        let request = Sample.request(pushType: .widgets, priority: .lowest, payload: ["aps": ["content-changed": true]])
        #expect(request.validate().isEmpty)
    }
}

@Suite struct AppleSafariWebPushTests {
    static let webTopic = "web.com.example.site"
    static let flight: JSONValue = [
        "aps": [
            "alert": ["title": "Flight A998 Now Boarding", "body": "Boarding has begun.", "action": "View"],
            "url-args": ["boarding", "A998"],
        ]
    ]

    @Test func theGuidesExampleIsAValidRequest() {
        #expect(Sample.request(topic: Self.webTopic, payload: Self.flight).validate().isEmpty)
        #expect(Sample.request(topic: Self.webTopic, priority: .lowest, payload: Self.flight).validate().isEmpty)
    }

    @Test func urlArgsAreAnArrayOfStringsForEveryTopic() {
        let bad: JSONValue = ["aps": ["alert": ["title": "t", "body": "b"], "url-args": ["boarding", 7]]]
        #expect(
            Sample.summary(Sample.request(topic: Self.webTopic, payload: bad).validate()) == [
                "payloadWrongType@payload.aps.url-args"
            ])
        #expect(APNsPayload.validate(["aps": ["alert": "x", "url-args": []]], pushType: .alert).isEmpty)
    }

    @Test func aWebPushNeedsTitleBodyAndUrlArgs() {
        let problems = Sample.request(topic: Self.webTopic, payload: ["aps": ["alert": ["title": "t", "action": 3]]])
            .validate()
        #expect(
            Sample.summary(problems) == [
                "payloadMissingKey@payload.aps.alert.body", "payloadWrongType@payload.aps.alert.action",
                "payloadMissingKey@payload.aps.url-args",
            ])
        let plain = Sample.request(topic: Self.webTopic, payload: ["aps": ["alert": "hi", "url-args": []]]).validate()
        #expect(Sample.summary(plain) == ["payloadWrongType@payload.aps.alert"])
    }

    @Test func onlyWebTopicsFollowSafarisRules() {
        #expect(APNsPayload.isWebTopic("web.com.example"))
        #expect(!APNsPayload.isWebTopic("website.com.example"))
        #expect(!APNsPayload.isWebTopic("web."))
        #expect(Sample.request(topic: "com.example.web", payload: ["aps": ["alert": "hi"]]).validate().isEmpty)
    }
}

@Suite struct AppleBroadcastRulesTests {
    @Test func aBroadcastMayUpdateOrEndButNotStart() {
        let update: JSONValue = ["aps": ["timestamp": 1, "event": "update", "content-state": ["eta": 3]]]
        #expect(APNsPayload.validateBroadcast(update).isEmpty)
        let start: JSONValue = ["aps": ["timestamp": 1, "event": "start", "content-state": ["eta": 3]]]
        #expect(Sample.summary(APNsPayload.validateBroadcast(start)) == ["payloadValueOutOfRange@payload.aps.event"])
    }
}
