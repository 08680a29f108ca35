// The object writer keeps its own buffer and grows it: whatever the starting capacity and whatever the
// texts need (escaping, non-ASCII, numbers, nested objects), its bytes are what `JSONValue.compactBytes`
// writes for the same members, and they parse as JSON.

import Testing

@testable import JSON

@Suite struct JSONObjectWriterTests {
    static let texts = [
        "", "plain", "quote \" and backslash \\", "line\nbreak\ttab\u{01}", "ünïcödé ✓ 🚀",
        String(repeating: "long text without escapes ", count: 40),
    ]

    /// Every kind of member the writer has, from a capacity far below what the object needs.
    @Test(arguments: [1, 16, 64, 4096])
    func bytesMatchTheCompactEncodingWhateverTheStartingCapacity(capacity: Int) throws {
        var writer = JSONObjectWriter(capacity: capacity)
        var expected = JSONObject()
        for (index, text) in Self.texts.enumerated() {
            writer.string("text", text)
            expected.appendUnchecked("text", .string(text))
            writer.integer("integer", Int64(index) * -1_234_567_891)
            expected.appendUnchecked("integer", .int(Int64(index) * -1_234_567_891))
        }
        writer.string("missing", nil)
        expected.appendUnchecked("missing", .null)
        writer.integer("no_number", nil)
        expected.appendUnchecked("no_number", .null)
        writer.integer("smallest", .min)
        expected.appendUnchecked("smallest", .int(.min))
        writer.double("whole", 3)
        expected.appendUnchecked("whole", .double(3))
        writer.double("fraction", 12.345)
        expected.appendUnchecked("fraction", .double(12.345))
        writer.double("not_finite", .nan)
        expected.appendUnchecked("not_finite", .double(.nan))
        writer.bool("yes", true)
        expected.appendUnchecked("yes", .bool(true))
        writer.timestamp("at", 1_764_590_400.123)
        expected.appendUnchecked("at", .string(RFC3339.format(1_764_590_400.123)))
        writer.timestamp("never", nil)
        expected.appendUnchecked("never", .null)
        writer.objects("items", [1, 2]) { object, item in
            object.integer("n", Int64(item))
            object.string("label", "item \"\(item)\"")
        }
        expected.appendUnchecked(
            "items", .array([1, 2].map { .object(["n": .int(Int64($0)), "label": .string("item \"\($0)\"")]) }))
        writer.object("nested") { object in object.value("value", ["a": [true, .null]]) }
        expected.appendUnchecked("nested", .object(["value": ["a": [true, .null]]]))

        let bytes = writer.finish()
        #expect(bytes == JSONValue.object(expected).compactBytes)
        _ = try JSONValue(parsing: bytes)
    }

    /// Texts and keys of every length from 0 to 40 bytes: the short copies take a different path for each
    /// size class (1, 2-3, 4-7, 8-16, longer), and each must write exactly its own bytes.
    @Test func textsOfEveryShortLengthAreCopiedExactly() throws {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN".utf8)
        var writer = JSONObjectWriter(capacity: 1)
        var expected = JSONObject()
        for length in 0...40 {
            let text = String(decoding: alphabet[length % 7..<length % 7 + length], as: UTF8.self)
            writer.string("t", text)
            expected.appendUnchecked("t", .string(text))
            writer.string("a_key_of_seventeen", "é" + text)
            expected.appendUnchecked("a_key_of_seventeen", .string("é" + text))
        }
        let bytes = writer.finish()
        #expect(bytes == JSONValue.object(expected).compactBytes)
        _ = try JSONValue(parsing: bytes)
    }

    /// Lent scratch room, too small (so the writer moves to its own memory midway) and large enough.
    @Test(arguments: [0, 16, 40, 4096])
    func bytesAreTheSameWrittenIntoScratchRoom(scratchBytes: Int) throws {
        func members(_ writer: inout JSONObjectWriter) {
            for (index, text) in Self.texts.enumerated() {
                writer.string("text", text)
                writer.integer("integer", Int64(index))
            }
            writer.objects("items", [1, 2]) { object, item in object.integer("n", Int64(item)) }
        }
        var owned = JSONObjectWriter(capacity: 16)
        members(&owned)
        let expected = owned.finish()
        let written = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: scratchBytes) { scratch in
            scratch.initialize(repeating: 0xFF)
            var writer = JSONObjectWriter(scratch: scratch)
            members(&writer)
            return writer.finish()
        }
        #expect(written == expected)
        _ = try JSONValue(parsing: written)
    }

    @Test func anEmptyObjectIsTwoBraces() {
        let writer = JSONObjectWriter(capacity: 0)
        #expect(writer.finish() == Array("{}".utf8))
    }
}
