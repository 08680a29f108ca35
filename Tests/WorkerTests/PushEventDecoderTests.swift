// Decoding push events from Kafka records, and the RFC 3339 times in them.

import APNs
import JSON
import Testing

@testable import Worker

@Suite struct PushEventDecoderTests {
    static let tokenA = String(repeating: "ab", count: 32)
    static let tokenB = String(repeating: "CD", count: 32)

    /// A check of the schema's over the UTF-8 of `text`, as it checks an event's texts where they lie.
    static func utf8(_ text: String, _ check: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var text = text
        return text.withUTF8(check)
    }

    @Test func decodesAFullEvent() throws {
        let text = """
            {"id":"evt-1","type":"chat.message","occurred_at":"2026-11-29T12:00:00.250+01:00","app":"com.example.chat",
             "recipient":{"user_id":"u1","locale":"fr-CA"},
             "devices":[{"token":"\(Self.tokenA)","environment":"production"},
                        {"token":"\(Self.tokenB)","environment":"development"}],
             "data":{"text":"hi"},"apns":{"priority":5,"badge":0,"relevance_score":0.5},"later_field":1}
            """
        let event = try PushEventDecoder.decode(Array(text.utf8))
        #expect(event.id == "evt-1")
        #expect(event.occurredAt == 1_795_950_000.25)
        #expect(
            event.devices == [
                EventDevice(token: Self.tokenA, environment: "production"),
                EventDevice(token: Self.tokenB, environment: "sandbox"),
            ])
        #expect(event.document.value["data"]?["text"] == "hi")
    }

    /// Member names are names, however the producer spelled them: an escaped name is read as the name it
    /// spells, and a name that only resembles one (another case, a trailing space) is another member.
    @Test func escapedMemberNamesAreTheNamesTheySpell() throws {
        let text =
            #"{"\u0069d":"e","typ\u0065":"t","\u0061pp":"com.example.chat","#
            + #""occurred_\u0061t":"2026-11-29T12:00:00Z","Type":"other","type ":"x","#
            + #""devices":[{"token":"\#(Self.tokenA)","environment":"production"}]}"#
        let event = try PushEventDecoder.decode(Array(text.utf8))
        #expect(event.id == "e" && event.type == "t" && event.app == "com.example.chat")
        #expect(event.occurredAt == 1_795_953_600)
        #expect(event.devices.map(\.token) == [Self.tokenA])
    }

    /// maxLength counts characters, not bytes: 256 two-byte characters fit, 257 one-byte ones do not.
    @Test func lengthLimitsCountCharactersNotBytes() throws {
        let id = String(repeating: "é", count: 256)
        let event = try PushEventDecoder.decode(Array(Self.event("id", "\"\(id)\"").utf8))
        #expect(event.id == id)
        #expect(throws: EventDecodingError.self) {
            try PushEventDecoder.decode(Array(Self.event("id", "\"\(String(repeating: "e", count: 257))\"").utf8))
        }
        #expect(Self.utf8(String(repeating: "é", count: 256)) { PushEventSchema.fits($0, 256) })
        #expect(!Self.utf8(String(repeating: "é", count: 257)) { PushEventSchema.fits($0, 256) })
        #expect(Self.utf8(String(repeating: "e", count: 256)) { PushEventSchema.fits($0, 256) })
    }

    /// A valid event with one member replaced (or removed, with nil).
    static func event(_ key: String, _ json: String?) -> String {
        var members = [
            ("id", #""e""#), ("type", #""t""#), ("app", #""com.example.chat""#),
            ("devices", #"[{"token":"\#(tokenA)","environment":"production"}]"#),
        ]
        if let index = members.firstIndex(where: { $0.0 == key }) {
            if let json { members[index].1 = json } else { members.remove(at: index) }
        } else if let json {
            members.append((key, json))
        }
        return "{" + members.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") + "}"
    }

    @Test(arguments: [
        (#"not json"#, EventDecodingError.Kind.undecodable, "not valid JSON"),
        (#"[1]"#, .schemaViolation, "must be a JSON object at $"),
        (event("id", nil), .schemaViolation, "id is missing at $"),
        (event("id", "1"), .schemaViolation, "id at $.id must be a string"),
        (event("id", "\"\(String(repeating: "é", count: 257))\""), .schemaViolation, "1 to 256 characters"),
        (event("app", nil), .schemaViolation, "app is missing at $"),
        (event("app", #""chat""#), .schemaViolation, "app at $.app must be a bundle id"),
        (event("devices", "[]"), .schemaViolation, "devices at $.devices is empty"),
        (
            event("devices", #"[{"token":"abc","environment":"production"}]"#), .schemaViolation,
            "token at $.devices[0].token must be"
        ),
        (
            event("devices", #"[{"token":"\#(String(repeating: "a", count: 62))","environment":"production"}]"#),
            .schemaViolation, "$.devices[0].token"
        ),
        (event("devices", #"[{"token":"\#(tokenA)"}]"#), .schemaViolation, "environment is missing at $.devices[0]"),
        (
            event("devices", #"[{"token":"\#(tokenA)","environment":"prod"}]"#), .schemaViolation,
            "$.devices[0].environment must be production, sandbox or development"
        ),
        (event("occurred_at", #""yesterday""#), .schemaViolation, "RFC 3339"),
        (event("occurred_at", "null"), .schemaViolation, "$.occurred_at"),
        (event("data", #""x""#), .schemaViolation, "data at $.data must be an object"),
        (event("recipient", #"{"locale":"french!"}"#), .schemaViolation, "$.recipient.locale"),
        (
            event("apns", #"{"priorty":10}"#), .schemaViolation,
            "unknown key 'priorty' at $.apns.priorty (did you mean priority?)"
        ),
        (event("apns", #"{"badge":"1"}"#), .schemaViolation, "apns.badge at $.apns.badge must be an integer"),
        (event("apns", #"{"priority":7}"#), .schemaViolation, "1, 5 or 10"),
        (event("apns", "[]"), .schemaViolation, "apns at $.apns must be an object"),
        (event("data", #"{"a":{"b":1,"b":2}}"#), .schemaViolation, "duplicate key 'b' at $.data.a"),
        (event("type", #""t","type":"u""#), .schemaViolation, "duplicate key 'type' at $"),
    ])
    func rejectsBadEventsSayingWhatIsWrongAndWhere(input: String, kind: EventDecodingError.Kind, message: String) {
        #expect {
            _ = try PushEventDecoder.decode(Array(input.utf8))
        } throws: { error in
            guard let error = error as? EventDecodingError else { return false }
            return error.kind == kind && error.message.contains(message)
        }
    }

    @Test func duplicateKeysAreAllowedByTheParserUnlessAsked() throws {
        let text = #"{"a":1,"a":2}"#
        #expect(try JSONValue(parsing: text)["a"] == 2)
        #expect {
            _ = try JSONValue(parsing: Array(text.utf8), options: JSONParsingOptions(allowsDuplicateKeys: false))
        } throws: { error in
            (error as? JSONParseError)?.duplicateMemberName == "a"
        }
    }

    @Test func parseErrorsNameTheirPath() {
        #expect {
            _ = try JSONValue(parsing: #"{"devices":[{"token":"a"},{"token":tru}]}"#)
        } throws: { error in
            (error as? JSONParseError)?.path == "$.devices[1].token"
        }
    }

    @Test func patternsMatchTheSchemas() {
        for good in ["com.example.chat", "a.b", "com.ex-ample.App2"] {
            #expect(Self.utf8(good, PushEventSchema.isBundleID), "\(good)")
        }
        for bad in ["chat", ".com", "com.", "com..example", "com.example/chat", "com.é"] {
            #expect(!Self.utf8(bad, PushEventSchema.isBundleID), "\(bad)")
        }
        for good in ["fr", "fr-CA", "zh_Hant_TW", "sr-Latn-RS"] {
            #expect(Self.utf8(good, PushEventSchema.isLanguageTag), "\(good)")
        }
        for bad in ["f", "french", "fr-", "fr-C", "1r-CA", "fr-CA-toolongpart", "fr CA"] {
            #expect(!Self.utf8(bad, PushEventSchema.isLanguageTag), "\(bad)")
        }
        for good in ["2026-11-29T12:00:00Z", "2026-11-29T12:00:00.123456789+01:30", "2026-11-29T12:00:00-05:00"] {
            #expect(Self.utf8(good, PushEventSchema.isTimestampShape), "\(good)")
        }
        for bad in [
            "2026-11-29 12:00:00Z", "2026-11-29T12:00:00", "2026-11-29T12:00:00.Z", "2026-11-29T12:00:00+0100",
            "2026-11-29T12:00:00.1234567890Z", "2026-11-29t12:00:00Z",
        ] {
            #expect(!Self.utf8(bad, PushEventSchema.isTimestampShape), "\(bad)")
        }
        #expect(Self.utf8(String(repeating: "aB", count: 100), PushEventSchema.isDeviceToken))
        #expect(!Self.utf8(String(repeating: "ab", count: 101), PushEventSchema.isDeviceToken))
        #expect(!Self.utf8(String(repeating: "ag", count: 32), PushEventSchema.isDeviceToken))
    }

    @Test func aDeviceTokenIsHexDigitsAndNothingElseWhateverTheByte() {
        let hexDigits = Set("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max where byte < 0x80 {
            var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: 64)
            bytes[31] = byte
            let token = String(decoding: bytes, as: UTF8.self)
            #expect(
                Self.utf8(token, PushEventSchema.isDeviceToken) == hexDigits.contains(byte),
                "byte 0x\(String(byte, radix: 16))")
        }
        // Bytes at or above 0x80, as the UTF-8 of a non-ASCII character (64 bytes in all, an even count).
        #expect(!Self.utf8(String(repeating: "0", count: 62) + "é", PushEventSchema.isDeviceToken))
        #expect(!Self.utf8(String(repeating: "0", count: 61) + "\u{FF10}", PushEventSchema.isDeviceToken))
    }

    @Test func emptyAndMissingValuesAreUndecodable() {
        #expect(throws: EventDecodingError.self) { try PushEventDecoder.decode(nil) }
        #expect(throws: EventDecodingError.self) { try PushEventDecoder.decode([]) }
    }
}

@Suite struct RFC3339Tests {
    @Test func parsesOffsetsAndFractions() {
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.parse("2026-11-29T12:00:00Z") == 1_795_953_600)
        #expect(RFC3339.parse("2026-11-29T13:30:00+01:30") == 1_795_953_600)
        #expect(RFC3339.parse("2024-02-29T00:00:00Z") == 1_709_164_800)
    }

    @Test func rejectsImpossibleDates() {
        #expect(RFC3339.parse("2026-02-29T00:00:00Z") == nil)
        #expect(RFC3339.parse("2026-13-01T00:00:00Z") == nil)
        #expect(RFC3339.parse("2026-11-29T12:00:00") == nil)
        #expect(RFC3339.parse("2026-11-29T12:00:00Zjunk") == nil)
    }

    @Test func formatsRoundTrip() {
        #expect(RFC3339.format(1_795_953_600.123) == "2026-11-29T12:00:00.123Z")
        #expect(RFC3339.parse(RFC3339.format(1_709_164_800.5)) == 1_709_164_800.5)
    }
}
