// JSON values: parsing, compact writing, escapes and byte counts.

import Testing

@testable import JSON

@Suite struct JSONValueTests {
    @Test func roundTripsKeepingKeyOrderAndIntegers() throws {
        let text = #"{"b":1,"a":[true,false,null,-2.5,"x"],"c":{"z":9007199254740993}}"#
        let value = try JSONValue(parsing: text)
        #expect(value.compactString == text)
        #expect(value["c"]?["z"] == .int(9_007_199_254_740_993))
    }

    @Test func escapesControlCharactersQuotesAndBackslashes() {
        let value: JSONValue = .string("a\"b\\c\nd\u{01}é😀")
        #expect(value.compactString == #""a\"b\\c\nd\u0001é😀""#)
    }

    @Test func countsUTF8BytesOfTheCompactForm() {
        let value: JSONValue = ["k": "日本"]
        #expect(value.compactByteCount == 14)  // {"k":"日本"} = 8 + 6
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        let value = try JSONValue(parsing: #""\u00e9\ud83d\ude00\/\t""#)
        #expect(value == .string("é😀/\t"))
    }

    @Test(arguments: [
        ("", "empty"), ("{", "end of input"), ("[1,]", "expected a value"), ("01", "leading zeros"),
        ("\"\\ud800\"", "surrogate"), ("{\"a\" 1}", "expected ':'"), ("tru", "literal"), ("1 2", "after the end"),
        ("\"a\u{01}\"", "control character"), ("1e999", "out of range"),
    ])
    func rejectsMalformedDocuments(input: String, expected: String) {
        #expect {
            _ = try JSONValue(parsing: input)
        } throws: { error in
            (error as? JSONParseError)?.message.contains(expected) == true
        }
    }

    @Test func rejectsInvalidUTF8WithItsPosition() {
        let bytes: [UInt8] = Array("{\n  \"a\": \"".utf8) + [0xC3, 0x28] + Array("\"}".utf8)
        #expect {
            _ = try JSONValue(parsing: bytes)
        } throws: { error in
            guard let error = error as? JSONParseError else { return false }
            return error.message.contains("UTF-8") && error.line == 2 && error.column == 8
        }
    }

    @Test func limitsNestingDepth() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        let fine = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        _ = try JSONValue(parsing: fine)
    }

    @Test func wholeDoublesPrintWithoutFraction() {
        #expect(JSONValue.double(3.0).compactString == "3")
        #expect(JSONValue.double(0.25).compactString == "0.25")
        #expect(JSONValue.double(.nan).compactString == "null")
    }

    @Test func objectSubscriptReplacesInPlaceAndRemoves() {
        var object: JSONObject = ["a": 1, "b": 2]
        object["a"] = 3
        object["c"] = 4
        object["b"] = nil
        #expect(JSONValue.object(object).compactString == #"{"a":3,"c":4}"#)
    }

    // Members wait on the parser's pending stack until their object ends; an object that outgrows its
    // room (JSONParser.pendingCapacity) spills into an array of its own. Both ways must give the same
    // objects, duplicates and errors.
    @Test(arguments: [3, JSONParser.pendingCapacity - 1, JSONParser.pendingCapacity, 150])
    func parsesObjectsOfAnySizeWithinOrBeyondThePendingRoom(members: Int) throws {
        // An outer object's members wait below each nested one's: the nested one at the end starts
        // with the room already taken by the outer's.
        let inner = (0..<members).map { "\"i\($0)\":\($0)" }.joined(separator: ",")
        let outer = (0..<members).map { "\"o\($0)\":\"v\($0)\"" }.joined(separator: ",")
        let text = "{\(outer),\"nested\":{\(inner)},\"after\":[{\"x\":1},{}]}"
        let value = try JSONValue(parsing: text)
        #expect(value.compactString == text)
        guard case .object(let object) = value, case .object(let nested)? = object["nested"] else {
            Issue.record("not an object with a nested object: \(value.compactString.prefix(80))")
            return
        }
        #expect(object.count == members + 2)
        #expect(nested.count == members)
        #expect(nested["i\(members - 1)"] == .int(Int64(members - 1)))
        // A repeated name: the last one wins by default, and is refused when duplicates are not allowed.
        let repeated = "{\(inner),\"i0\":\"last\"}"
        #expect(try JSONValue(parsing: repeated)["i0"] == .string("last"))
        #expect(try JSONValue(parsing: repeated)["i1"] == (members > 1 ? JSONValue.int(1) : nil))
        #expect {
            _ = try JSONValue(
                parsing: Array(repeated.utf8), options: JSONParsingOptions(allowsDuplicateKeys: false))
        } throws: { error in
            (error as? JSONParseError)?.duplicateMemberName == "i0"
        }
        // A failure deep inside, with members of every enclosing object still pending, is reported where
        // it is, and the members still pending are let go.
        let broken = "{\(outer),\"nested\":{\(inner),\"bad\":[1,}]}}"
        #expect {
            _ = try JSONValue(parsing: broken)
        } throws: { error in
            (error as? JSONParseError)?.path == "$.nested.bad[1]"
        }
    }

    @Test func memberNamesAreTheirCodeUnitsNotTheirCanonicalEquivalents() throws {
        // "é" precomposed (2 bytes of UTF-8) and decomposed (3): equal as Swift strings, two names in JSON.
        let text = "{\"caf\u{E9}\":1,\"cafe\u{301}\":2}"
        let value = try JSONValue(
            parsing: Array(text.utf8), options: JSONParsingOptions(allowsDuplicateKeys: false))
        #expect(value.objectValue?.count == 2)
        #expect(value["caf\u{E9}"] == .int(1))
        #expect(value["cafe\u{301}"] == .int(2))
        #expect(value["cafe"] == nil)
    }

    @Test func deepNestingOfObjectsSpillsOnlyWhatOutgrowsTheRoom() throws {
        let depth = 120
        let text = String(repeating: #"{"a":1,"b":"#, count: depth) + "0" + String(repeating: "}", count: depth)
        let value = try JSONValue(parsing: text)
        #expect(value.compactString == text)
        var level = value
        for _ in 0..<depth - 1 { level = level["b"] ?? .null }
        #expect(level == ["a": 1, "b": 0])
    }

    @Test func followsDottedPathsThroughObjectsAndArrays() throws {
        let value = try JSONValue(parsing: #"{"data":{"list":[{"n":"x"}]}}"#)
        #expect(value.value(atPath: "data.list.0.n".split(separator: ".")) == .string("x"))
        #expect(value.value(atPath: "data.missing".split(separator: ".")) == nil)
    }
}
