// Decoding push events from Kafka records, and the RFC 3339 times in them.

import APNs
import JSON
import Testing

@testable import Worker

@Suite struct PushEventDecoderTests {
    @Test func decodesAFullEvent() throws {
        let text = #"""
            {"id":"evt-1","type":"chat.message","occurred_at":"2026-11-29T12:00:00.250+01:00","app":"com.example.chat",
             "recipient":{"user_id":"u1","locale":"fr-CA"},
             "devices":[{"token":"ab01","environment":"production"},{"token":"cd02","environment":"development"}],
             "data":{"text":"hi"}}
            """#
        let event = try PushEventDecoder.decode(Array(text.utf8))
        #expect(event.id == "evt-1")
        #expect(event.occurredAt == 1_795_950_000.25)
        #expect(
            event.devices == [
                EventDevice(token: "ab01", environment: "production"),
                EventDevice(token: "cd02", environment: "sandbox"),
            ])
        #expect(event.document["data"]?["text"] == "hi")
    }

    @Test(arguments: [
        (#"not json"#, EventDecodingError.Kind.undecodable, "not valid JSON"),
        (#"[1]"#, .schemaViolation, "must be a JSON object"),
        (#"{"type":"t","devices":[{"token":"a"}]}"#, .schemaViolation, "id is missing"),
        (#"{"id":1,"type":"t","devices":[{"token":"a"}]}"#, .schemaViolation, "id must be a string"),
        (#"{"id":"e","type":"t","devices":[]}"#, .schemaViolation, "devices is empty"),
        (#"{"id":"e","type":"t","devices":[{"token":""}]}"#, .schemaViolation, "devices[0].token"),
        (#"{"id":"e","type":"t","devices":[{"token":"a","environment":"prod"}]}"#, .schemaViolation, "environment"),
        (#"{"id":"e","type":"t","occurred_at":"yesterday","devices":[{"token":"a"}]}"#, .schemaViolation, "RFC 3339"),
        (#"{"id":"e","type":"t","data":"x","devices":[{"token":"a"}]}"#, .schemaViolation, "data must be an object"),
    ])
    func rejectsBadEventsSayingWhatIsWrong(input: String, kind: EventDecodingError.Kind, message: String) {
        #expect {
            _ = try PushEventDecoder.decode(Array(input.utf8))
        } throws: { error in
            guard let error = error as? EventDecodingError else { return false }
            return error.kind == kind && error.message.contains(message)
        }
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
