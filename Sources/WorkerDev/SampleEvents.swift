// Sample events for `apns-worker dev` and `apns-worker bench pipeline`: realistic shapes (chat
// messages, shipped orders, background refreshes) over a fixed population of devices, some of
// which the simulator is told are dead, plus the occasional malformed record for the DLQ.

import APNs
import JSON

/// Makes deterministic sample events; the same seed gives the same stream.
public struct SampleEventGenerator: Sendable {
    public struct Device: Sendable, Hashable {
        public var token: String
        public var environment: String
    }

    public let app: String
    public let devices: [Device]
    /// Tokens the simulator should answer 410 Unregistered for.
    public let unregisteredTokens: [String]
    /// One record in this many is malformed (0 = never).
    public let malformedEvery: Int
    private var state: UInt64

    public init(
        app: String = "com.example.chat", deviceCount: Int = 200, unregisteredEvery: Int = 25,
        malformedEvery: Int = 50, seed: UInt64 = 0x5EED
    ) {
        self.app = app
        self.malformedEvery = malformedEvery
        var devices: [Device] = []
        var unregistered: [String] = []
        var mixer = seed
        for index in 0..<deviceCount {
            var hex = ""
            for _ in 0..<4 {
                mixer = SampleEventGenerator.splitMix(mixer)
                let word = String(mixer, radix: 16)
                hex += String(repeating: "0", count: 16 - word.count) + word
            }
            devices.append(Device(token: hex, environment: index % 5 == 4 ? "sandbox" : "production"))
            if unregisteredEvery > 0 && index % unregisteredEvery == unregisteredEvery - 1 { unregistered.append(hex) }
        }
        self.devices = devices
        self.unregisteredTokens = unregistered
        self.state = seed
    }

    static func splitMix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next(_ bound: Int) -> Int {
        state = SampleEventGenerator.splitMix(state)
        return Int(state % UInt64(bound))
    }

    static let senders = ["Ana", "Bo", "Chloé", "Dmitri", "Eun-ji", "Farah", "Gustavo", "Hiroshi"]
    static let texts = [
        "hi", "are we still on for tonight?", "🎉 congrats!", "see you at 7", "can you call me?",
        "日本語のメッセージ", "the \"quotes\" and \\backslashes\\ survive", "line one\nline two",
    ]
    static let locales = ["en-US", "fr-CA", "fr-FR", "de-DE", "ja-JP", "es"]

    /// The `sequence`-th event as (key, value bytes); `occurredAt` in UNIX seconds.
    public mutating func event(sequence: Int, occurredAt: Double) -> (key: [UInt8], value: [UInt8]) {
        let userID = "u\(next(1000))"
        if malformedEvery > 0 && sequence % malformedEvery == malformedEvery - 1 {
            // A producer bug: truncated JSON. It must reach the dead-letter topic, not stop anything.
            return (Array(userID.utf8), Array(#"{"id":"evt-\#(sequence)","type":"chat.mess"#.utf8))
        }
        let deviceCount = 1 + next(3)
        var chosen: [JSONValue] = []
        for _ in 0..<deviceCount {
            let device = devices[next(devices.count)]
            chosen.append(["token": .string(device.token), "environment": .string(device.environment)])
        }
        var event = JSONObject()
        event["id"] = .string("evt-\(sequence)")
        event["occurred_at"] = .string(RFC3339.format(occurredAt))
        event["app"] = .string(app)
        event["recipient"] = ["user_id": .string(userID), "locale": .string(Self.locales[next(Self.locales.count)])]
        event["devices"] = .array(chosen)
        let sender: JSONValue = ["name": .string(Self.senders[next(Self.senders.count)])]
        let thread = JSONValue.string("t\(next(50))")
        // Mostly chat, as a messaging backend sends; the rest exercises other rules and the no-rule skip.
        switch next(20) {
        case 0..<12:
            event["type"] = "chat.message"
            event["data"] = [
                "sender": sender, "text": .string(Self.texts[next(Self.texts.count)]), "thread_id": thread,
                "message_id": .string("m\(sequence)"), "unread_count": .int(Int64(1 + next(20))),
            ]
        case 12..<14:
            event["type"] = "chat.message"
            event["data"] = [
                "sender": sender, "text": "look!", "thread_id": thread, "message_id": .string("m\(sequence)"),
                "attachment": ["kind": "photo", "url": .string("https://cdn.example.com/p/\(sequence).jpg")],
            ]
        case 14..<16:
            event["type"] = "chat.read"
            event["data"] = ["thread_id": thread]
        case 16..<18:
            event["type"] = "order.shipped"
            event["data"] = ["order": ["number": .string("A-\(10_000 + sequence)")], "carrier": "dhl"]
        case 18:
            event["type"] = "chat.message"
            event["data"] = ["sender": sender, "text": "shh", "thread_id": thread, "thread_muted": true]
        default:
            // No rule matches this type: the outcome says `skipped` with reason `no_rule`.
            event["type"] = "inventory.recount"
            event["data"] = ["warehouse": "w1"]
        }
        return (Array(userID.utf8), JSONValue.object(event).compactBytes)
    }
}
