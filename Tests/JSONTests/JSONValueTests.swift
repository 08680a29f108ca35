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

    @Test func followsDottedPathsThroughObjectsAndArrays() throws {
        let value = try JSONValue(parsing: #"{"data":{"list":[{"n":"x"}]}}"#)
        #expect(value.value(atPath: "data.list.0.n".split(separator: ".")) == .string("x"))
        #expect(value.value(atPath: "data.missing".split(separator: ".")) == nil)
    }
}
