// Payload checks per push type: sizes counted in bytes of the compact form, and the shapes background,
// Live Activity, widget, MDM and PushKit payloads must have.

import APNs
import JSON
import Testing

@Suite struct PayloadSizeTests {
    @Test(arguments: [Character("a"), "日", "😀"])
    func alertPayloadOf4096BytesPassesAnd4097Fails(filler: Character) {
        let fits = Sample.alertPayload(byteCount: 4096, filler: filler)
        #expect(APNsPayload.validate(fits, pushType: .alert).isEmpty)
        let over = Sample.alertPayload(byteCount: 4097, filler: filler)
        let problems = APNsPayload.validate(over, pushType: .alert)
        #expect(Sample.summary(problems) == ["payloadTooLarge@payload"])
        let message = problems.first?.message ?? ""
        #expect(message.contains("4097 bytes of compact UTF-8 JSON, 1 over the 4096-byte limit"))
    }

    @Test(arguments: [Character("a"), "日", "😀"])
    func voipPayloadOf5120BytesPassesAnd5121Fails(filler: Character) {
        #expect(APNsPayload.validate(Sample.alertPayload(byteCount: 5120, filler: filler), pushType: .voip).isEmpty)
        let problems = APNsPayload.validate(Sample.alertPayload(byteCount: 5121, filler: filler), pushType: .voip)
        #expect(Sample.summary(problems) == ["payloadTooLarge@payload"])
    }

    @Test func theLimitCountsBytesNotCharacters() {
        // 1400 CJK characters: 1420 characters of JSON, but 4220 bytes.
        let payload: JSONValue = ["aps": ["alert": .string(String(repeating: "日", count: 1400))]]
        #expect(payload.compactString.count == 1420)
        #expect(Sample.summary(APNsPayload.validate(payload, pushType: .alert)) == ["payloadTooLarge@payload"])
        // 1019 emoji: 1039 characters, 4096 bytes exactly.
        let emoji: JSONValue = ["aps": ["alert": .string(String(repeating: "😀", count: 1019))]]
        #expect(emoji.compactByteCount == 4096)
        #expect(APNsPayload.validate(emoji, pushType: .alert).isEmpty)
    }

    @Test func everyNonVoipTypeHasThe4096Limit() {
        let payload = Sample.alertPayload(byteCount: 4097, filler: "a")
        for type in PushType.allCases {
            let tooLarge = APNsPayload.validate(payload, pushType: type).contains { $0.code == .payloadTooLarge }
            #expect(tooLarge == (type != .voip), "\(type)")
        }
    }

    @Test func sizeIsCountedOnTheCompactFormNotTheTextAsTyped() throws {
        // Whitespace in the typed JSON is not sent, so it does not count.
        let padded = "{ \"aps\" : { \"alert\" : \"" + String(repeating: "a", count: 4076) + "\" }   }"
        let payload = try JSONValue(parsing: padded)
        #expect(payload.compactByteCount == 4096)
        #expect(APNsPayload.validate(payload, pushType: .alert).isEmpty)
    }
}

@Suite struct PayloadShapeTests {
    @Test func payloadMustBeAnObject() {
        let problems = APNsPayload.validate(["aps"], pushType: .alert)
        #expect(Sample.summary(problems) == ["payloadNotObject@payload"])
        #expect(problems[0].message.contains("is an array; it must be a JSON object"))
    }

    @Test func apsIsRequiredWhereThePushTypeNeedsIt() {
        for type in PushType.allCases {
            let problems = APNsPayload.validate(["custom": 1], pushType: type)
            let missing = problems.contains { $0.code == .payloadMissingAPS && $0.field == "payload.aps" }
            let needed: Set<PushType> = [.alert, .background, .liveactivity, .widgets, .controls]
            #expect(missing == needed.contains(type), "\(type)")
            #expect(APNsPayload.requiresAPS(type) == needed.contains(type))
        }
    }

    @Test func apsMustBeADictionary() {
        let problems = APNsPayload.validate(["aps": "hello"], pushType: .alert)
        #expect(Sample.summary(problems) == ["payloadWrongType@payload.aps"])
    }

    @Test func customKeysInsideApsAreFlaggedOneByOne() {
        let payload: JSONValue = ["aps": ["alert": "hi", "orderId": 7, "deeplink": "app://x"], "fine": 1]
        let problems = APNsPayload.validate(payload, pushType: .alert)
        #expect(
            Sample.summary(problems) == [
                "payloadUnknownAPSKey@payload.aps.orderId", "payloadUnknownAPSKey@payload.aps.deeplink",
            ])
        #expect(problems[0].message.contains("put custom data beside \"aps\" at the top level"))
    }

    @Test func everyDocumentedApsKeyIsAccepted() {
        for key in [
            "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
            "target-content-id", "interruption-level", "relevance-score", "filter-criteria", "timestamp",
            "event", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        ] {
            #expect(APNsPayload.apsKeys.contains(key), "\(key)")
        }
    }

    @Test func aFullyLoadedAlertPasses() {
        let payload: JSONValue = [
            "aps": [
                "alert": [
                    "title": "T", "subtitle": "S", "body": "B", "loc-key": "K", "loc-args": ["a", "b"],
                    "title-loc-args": [], "launch-image": "x.png",
                ],
                "badge": 0, "sound": ["critical": 1, "name": "default", "volume": 0.5], "thread-id": "t7",
                "category": "MSG", "mutable-content": 1, "target-content-id": "w1",
                "interruption-level": "time-sensitive",
                "relevance-score": 1.0, "filter-criteria": "work",
            ],
            "sender": ["name": "Ana"],
        ]
        #expect(APNsPayload.validate(payload, pushType: .alert).isEmpty)
    }

    @Test(
        arguments: [
            (["badge": "3"], "payloadWrongType@payload.aps.badge"),
            (["badge": 1.5], "payloadWrongType@payload.aps.badge"),
            (["badge": -1], "payloadValueOutOfRange@payload.aps.badge"),
            (["sound": 1], "payloadWrongType@payload.aps.sound"),
            (["sound": ["name": "x", "volume": 1.5]], "payloadValueOutOfRange@payload.aps.sound.volume"),
            (["sound": ["name": "x", "volume": -0.1]], "payloadValueOutOfRange@payload.aps.sound.volume"),
            (["sound": ["name": "x", "volume": "loud"]], "payloadWrongType@payload.aps.sound.volume"),
            (["sound": ["name": "x", "critical": 2]], "payloadValueOutOfRange@payload.aps.sound.critical"),
            (["sound": ["name": 3]], "payloadWrongType@payload.aps.sound.name"),
            (["sound": ["critical": 1]], "payloadMissingKey@payload.aps.sound.name"),
            (["sound": ["name": "x", "pitch": 2]], "payloadUnknownAPSKey@payload.aps.sound.pitch"),
            (["alert": 5], "payloadWrongType@payload.aps.alert"),
            (["alert": ["title": 5]], "payloadWrongType@payload.aps.alert.title"),
            (["alert": ["loc-args": "x"]], "payloadWrongType@payload.aps.alert.loc-args"),
            (["alert": ["loc-args": [1]]], "payloadWrongType@payload.aps.alert.loc-args"),
            (["interruption-level": "urgent"], "payloadValueOutOfRange@payload.aps.interruption-level"),
            (["interruption-level": 2], "payloadWrongType@payload.aps.interruption-level"),
            (["relevance-score": 1.01], "payloadValueOutOfRange@payload.aps.relevance-score"),
            (["relevance-score": "high"], "payloadWrongType@payload.aps.relevance-score"),
            (["content-available": 0], "payloadValueOutOfRange@payload.aps.content-available"),
            (["mutable-content": true], "payloadWrongType@payload.aps.mutable-content"),
            (["thread-id": 7], "payloadWrongType@payload.aps.thread-id"),
            (["category": ["x"]], "payloadWrongType@payload.aps.category"),
        ] as [(JSONValue, String)])
    func knownApsFieldsAreTypeChecked(aps: JSONValue, expected: String) {
        let problems = APNsPayload.validate(["aps": aps], pushType: .alert)
        #expect(Sample.summary(problems) == [expected], "\(aps.compactString)")
    }

    @Test func interruptionLevelsAreTheFourApplesDefines() {
        for level in ["passive", "active", "time-sensitive", "critical"] {
            #expect(APNsPayload.validate(["aps": ["interruption-level": .string(level)]], pushType: .alert).isEmpty)
        }
    }

    @Test func unitIntervalBoundsAreInclusive() {
        for score: JSONValue in [0, 1, 0.0, 1.0, 0.25] {
            #expect(APNsPayload.validate(["aps": ["relevance-score": score]], pushType: .alert).isEmpty)
            #expect(APNsPayload.validate(["aps": ["sound": ["name": "a", "volume": score]]], pushType: .alert).isEmpty)
        }
    }
}

@Suite struct BackgroundPayloadTests {
    @Test func onlyContentAvailableOnePasses() {
        let payload: JSONValue = ["aps": ["content-available": 1], "sync": "inbox"]
        #expect(APNsPayload.validate(payload, pushType: .background).isEmpty)
    }

    @Test func alertBadgeAndSoundAreEachRefused() {
        let payload: JSONValue = ["aps": ["content-available": 1, "alert": "x", "badge": 1, "sound": "default"]]
        let problems = APNsPayload.validate(payload, pushType: .background)
        #expect(
            Sample.summary(problems) == [
                "payloadKeyNotAllowed@payload.aps.alert", "payloadKeyNotAllowed@payload.aps.badge",
                "payloadKeyNotAllowed@payload.aps.sound",
            ])
        #expect(problems[0].message.contains("use push type alert"))
    }

    @Test func otherApsKeysAreRefusedToo() {
        let payload: JSONValue = ["aps": ["content-available": 1, "mutable-content": 1, "thread-id": "t"]]
        #expect(
            Sample.summary(APNsPayload.validate(payload, pushType: .background)) == [
                "payloadKeyNotAllowed@payload.aps.mutable-content", "payloadKeyNotAllowed@payload.aps.thread-id",
            ])
    }

    @Test func contentAvailableIsRequiredAndMustBeOne() {
        #expect(
            Sample.summary(APNsPayload.validate(["aps": [:]], pushType: .background))
                == ["payloadMissingKey@payload.aps.content-available"])
        #expect(
            Sample.summary(APNsPayload.validate(["aps": ["content-available": 2]], pushType: .background))
                == ["payloadValueOutOfRange@payload.aps.content-available"])
    }

    @Test func theSameKeysAreFineForAlerts() {
        let payload: JSONValue = ["aps": ["content-available": 1, "alert": "x", "badge": 1, "sound": "default"]]
        #expect(APNsPayload.validate(payload, pushType: .alert).isEmpty)
    }
}

@Suite struct LiveActivityPayloadTests {
    static let start: JSONValue = [
        "aps": [
            "timestamp": 1_764_417_600, "event": "start", "attributes-type": "DeliveryAttributes",
            "attributes": ["orderID": "o1"], "content-state": ["eta": 12], "alert": ["title": "On its way"],
        ]
    ]

    @Test func aCompleteStartPasses() {
        #expect(APNsPayload.validate(Self.start, pushType: .liveactivity).isEmpty)
    }

    @Test func startNeedsContentStateAlertAttributesTypeAndAttributes() {
        let payload: JSONValue = ["aps": ["timestamp": 1_764_417_600, "event": "start"]]
        #expect(
            Sample.summary(APNsPayload.validate(payload, pushType: .liveactivity)) == [
                "payloadMissingKey@payload.aps.content-state", "payloadMissingKey@payload.aps.alert",
                "payloadMissingKey@payload.aps.attributes-type", "payloadMissingKey@payload.aps.attributes",
            ])
    }

    @Test func updateAndEndNeedTimestampEventAndContentState() {
        for event: JSONValue in ["update", "end"] {
            let complete: JSONValue = ["aps": ["timestamp": 1, "event": event, "content-state": ["eta": 3]]]
            #expect(APNsPayload.validate(complete, pushType: .liveactivity).isEmpty)
            #expect(
                Sample.summary(
                    APNsPayload.validate(["aps": ["timestamp": 1, "event": event]], pushType: .liveactivity))
                    == ["payloadMissingKey@payload.aps.content-state"])
        }
    }

    @Test func timestampAndEventAreRequired() {
        #expect(
            Sample.summary(APNsPayload.validate(["aps": ["content-state": [:]]], pushType: .liveactivity)) == [
                "payloadMissingKey@payload.aps.timestamp", "payloadMissingKey@payload.aps.event",
            ])
    }

    @Test func eventMustBeStartUpdateOrEnd() {
        let problems = APNsPayload.validate(["aps": ["timestamp": 1, "event": "stop"]], pushType: .liveactivity)
        #expect(Sample.summary(problems) == ["payloadValueOutOfRange@payload.aps.event"])
        #expect(problems[0].message.contains("use start, update or end"))
    }

    @Test func datesAreWholeSecondsNotMilliseconds() {
        let aps: JSONValue = [
            "timestamp": 1_764_417_600_000, "event": "update", "stale-date": "soon", "dismissal-date": -4,
            "content-state": "x",
        ]
        #expect(
            Sample.summary(APNsPayload.validate(["aps": aps], pushType: .liveactivity)) == [
                "payloadValueOutOfRange@payload.aps.timestamp", "payloadWrongType@payload.aps.stale-date",
                "payloadValueOutOfRange@payload.aps.dismissal-date", "payloadWrongType@payload.aps.content-state",
            ])
    }

    @Test func theLiveActivityRulesApplyOnlyToLiveActivities() {
        #expect(APNsPayload.validate(["aps": ["alert": "x"]], pushType: .alert).isEmpty)
        #expect(!APNsPayload.validate(["aps": ["alert": "x"]], pushType: .liveactivity).isEmpty)
    }
}

@Suite struct OtherPushTypePayloadTests {
    @Test func widgetAndControlPushesCarryContentChanged() {
        for type in [PushType.widgets, .controls] {
            #expect(APNsPayload.validate(["aps": ["content-changed": true]], pushType: type).isEmpty)
            #expect(
                Sample.summary(APNsPayload.validate(["aps": ["content-changed": 1]], pushType: type))
                    == ["payloadWrongType@payload.aps.content-changed"])
        }
    }

    @Test func mdmPayloadIsThePushMagicWithoutAps() {
        #expect(APNsPayload.validate(["mdm": "3C7B1E5A"], pushType: .mdm).isEmpty)
    }

    @Test func pushKitTypesNeedNoApsButStillCheckItWhenPresent() {
        for type in [PushType.voip, .complication, .fileprovider, .location, .pushtotalk] {
            #expect(APNsPayload.validate(["call": ["id": "c1"]], pushType: type).isEmpty, "\(type)")
            #expect(
                Sample.summary(APNsPayload.validate(["aps": ["callId": "c1"]], pushType: type))
                    == ["payloadUnknownAPSKey@payload.aps.callId"], "\(type)")
        }
    }
}
