// Push types as Apple's table gives them: header values, topic suffixes and priorities.

import APNs
import JSON
import Testing

@Suite struct PushTypeTests {
    static let table: [(PushType, suffix: String, priorities: [Int], defaultPriority: Int, limit: Int)] = [
        (.alert, "", [10, 5, 1], 10, 4096),
        (.background, "", [5], 5, 4096),
        (.voip, ".voip", [10, 5, 1], 10, 5120),
        (.complication, ".complication", [10, 5, 1], 10, 4096),
        (.fileprovider, ".pushkit.fileprovider", [10, 5, 1], 10, 4096),
        (.mdm, "", [10, 5, 1], 10, 4096),
        (.location, ".location-query", [10, 5, 1], 10, 4096),
        (.liveactivity, ".push-type.liveactivity", [10, 5], 10, 4096),
        (.pushtotalk, ".voip-ptt", [10], 10, 4096),
        (.widgets, ".push-type.widgets", [10, 5, 1], 10, 4096),
        (.controls, ".push-type.controls", [10, 5, 1], 10, 4096),
    ]

    @Test func everyPushTypeFollowsApplesTable() {
        #expect(Self.table.map(\.0) == PushType.allCases)
        for row in Self.table {
            #expect(row.0.topicSuffix == row.suffix, "\(row.0)")
            #expect(row.0.allowedPriorities.map(\.rawValue) == row.priorities, "\(row.0)")
            #expect(row.0.defaultPriority.rawValue == row.defaultPriority, "\(row.0)")
            #expect(row.0.payloadLimit == row.limit, "\(row.0)")
        }
    }

    @Test func headerValuesAreTheLowercaseNames() {
        #expect(
            PushType.allCases.map(\.rawValue) == [
                "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity",
                "pushtotalk", "widgets", "controls",
            ])
    }

    @Test func topicAddsTheSuffixToABundleID() {
        #expect(PushType.alert.topic(forBundle: "com.example.app") == "com.example.app")
        #expect(PushType.background.topic(forBundle: "com.example.app") == "com.example.app")
        #expect(PushType.voip.topic(forBundle: "com.example.app") == "com.example.app.voip")
        #expect(
            PushType.liveactivity.topic(forBundle: "com.example.app")
                == "com.example.app.push-type.liveactivity")
        #expect(PushType.pushtotalk.topic(forBundle: "com.example.app") == "com.example.app.voip-ptt")
        #expect(PushType.fileprovider.topic(forBundle: "com.example.app") == "com.example.app.pushkit.fileprovider")
    }

    @Test func topicKeepsASuffixThatIsAlreadyThere() {
        for type in PushType.allCases where !type.topicSuffix.isEmpty {
            let topic = "com.example.app" + type.topicSuffix
            #expect(type.topic(forBundle: topic) == topic, "\(type)")
        }
    }

    @Test func pushToTalkIsNotMistakenForVoip() {
        // ".voip-ptt" does not end in ".voip", and "com.x.voip" is not yet a push-to-talk topic.
        #expect(PushType.voip.topic(forBundle: "com.x.voip-ptt") == "com.x.voip-ptt.voip")
        #expect(PushType.pushtotalk.topic(forBundle: "com.x.voip") == "com.x.voip.voip-ptt")
    }

    @Test func mdmTopicIsUsedAsGiven() {
        let magic = "com.apple.mgmt.External.0c4a3c4b-6f25-4c1d-9f0e-3c8a5b3e2d11"
        #expect(PushType.mdm.topic(forBundle: magic) == magic)
    }

    @Test func parsesHeaderValuesLoosely() throws {
        #expect(try PushType(parsing: " LiveActivity ") == .liveactivity)
        let error = captured { try PushType(parsing: "push") }
        #expect(error?.code == .pushTypeUnknown)
        #expect(error?.message.contains("alert, background, voip") == true)
    }
}

@Suite struct PriorityTests {
    @Test func namedPrioritiesHaveApplesNumbers() {
        #expect(APNsPriority.immediately.rawValue == 10)
        #expect(APNsPriority.considerPower.rawValue == 5)
        #expect(APNsPriority.lowest.rawValue == 1)
        #expect(APNsPriority.immediately.headerValue == "10")
    }

    @Test(arguments: [10, 5, 1])
    func acceptsTheThreeDefinedValues(value: Int) throws {
        #expect(try APNsPriority(value).rawValue == value)
        #expect(try APNsPriority(parsing: " \(value)").rawValue == value)
    }

    @Test(arguments: [0, 2, 4, 6, 9, 11, -10, 100])
    func refusesOtherNumbers(value: Int) {
        let error = captured { try APNsPriority(value) }
        #expect(error?.code == .priorityInvalid)
        #expect(error?.message.contains("use 10 (immediately), 5 (consider device power) or 1") == true)
    }

    @Test func refusesText() {
        #expect(captured { try APNsPriority(parsing: "high") }?.code == .priorityInvalid)
    }

    @Test(arguments: PushType.allCases)
    func requestValidationAllowsExactlyThePushTypesPriorities(type: PushType) throws {
        for priority in [APNsPriority.immediately, .considerPower, .lowest] {
            let problems = Sample.request(pushType: type, priority: priority, payload: validPayload(for: type))
                .validate()
            let refused = problems.contains { $0.code == .priorityNotAllowed && $0.field == "apns-priority" }
            #expect(refused == !type.allowedPriorities.contains(priority), "\(type) priority \(priority)")
            #expect(problems.count == (refused ? 1 : 0), "\(type) priority \(priority): \(problems)")
        }
    }

    @Test func defaultPriorityIsUsedWhenNoneIsGiven() {
        let background = Sample.request(pushType: .background, payload: validPayload(for: .background))
        #expect(background.priority == .considerPower)
        #expect(Sample.request(pushType: .alert).priority == .immediately)
    }

    @Test func backgroundPriorityProblemSaysWhatWouldBeRight() {
        let problems = Sample.request(
            pushType: .background, priority: .immediately,
            payload: validPayload(for: .background)
        ).validate()
        #expect(problems.first?.message == "priority 10 is not allowed for background pushes; use 5")
    }
}

/// A payload that passes every rule for the push type.
func validPayload(for type: PushType) -> JSONValue {
    switch type {
    case .background: return ["aps": ["content-available": 1]]
    case .liveactivity:
        return ["aps": ["timestamp": 1_764_417_600, "event": "update", "content-state": ["score": 3]]]
    case .mdm: return ["mdm": "3C7B1E5A-0B7A-4B5A-9C1D-2E3F4A5B6C7D"]
    case .widgets, .controls: return ["aps": ["content-changed": true]]
    default: return ["aps": ["alert": "hi"]]
    }
}
