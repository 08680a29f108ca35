// The simulator's value-free payload check must agree with the APNs module's JSON parser.

import APNs
import JSON
import Testing

@testable import APNsSimulator

/// The shape as the full parser sees it.
func shapeByFullParse(_ text: String) -> PayloadShape {
    guard let value = try? JSONValue(parsing: Array(text.utf8)) else { return .notJSON }
    guard case .object(let root) = value else { return .notObject }
    switch root["aps"] {
    case nil: return .object(aps: .absent)
    case .object?: return .object(aps: .dictionary)
    default: return .object(aps: .other)
    }
}

@Suite struct PayloadShapeTests {
    static let corpus: [String] = [
        #"{"aps":{"alert":"hi"}}"#, #"{"aps":{}}"#, #"{}"#, #" { "aps" : { } } "#, "\n{\"aps\":\t{}}\r\n",
        #"{"aps":"hi"}"#, #"{"aps":[1]}"#, #"{"aps":null}"#, #"{"aps":1}"#, #"{"data":{"aps":{}}}"#,
        #"{"\u0061ps":{}}"#, #"{"ap\"s":{}}"#, #"{"aps":{},"aps":"x"}"#, #"{"aps":"x","aps":{}}"#,
        #"[{"aps":{}}]"#, #""aps""#, "1", "-0.5e+10", "true", "null", "[]", "[1,2,3]",
        #"{"a":[true,false,null,-1,0,1.5,2e3,"\n\u00e9\ud83d\ude00"]}"#,
        #"{"aps":{"alert":{"title":"Grüße 語 😀","body":"x"}},"custom":{"k":[1,{"n":null}]}}"#,
        // Invalid documents.
        "", " ", "{", "}", #"{"aps":}"#, #"{"aps" {}}"#, #"{"aps":{},}"#, #"{,}"#, #"{"a":1 "b":2}"#,
        #"[1,]"#, "[1 2]", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul", "truex", #"{"a":1}x"#, #"{"a":1}{}"#,
        #"{"a":"\x"}"#, #"{"a":"\u12"}"#, "{\"a\":\"tab\there\"}", #"{"a":'x'}"#, #"{a:1}"#, #"{"a":1"#,
        #"{"aps":{"alert":"unterminated}}"#, String(repeating: "[", count: 200) + String(repeating: "]", count: 200),
    ]

    @Test(arguments: corpus)
    func agreesWithTheFullParser(_ text: String) {
        #expect(PayloadShape.inspect(Array(text.utf8)) == shapeByFullParse(text), "\(text.prefix(60))")
    }

    @Test func answersTheApsQuestion() {
        #expect(PayloadShape.inspect(Array(#"{"aps":{"alert":"hi"}}"#.utf8)) == .object(aps: .dictionary))
        #expect(PayloadShape.inspect(Array(#"{"call":1}"#.utf8)) == .object(aps: .absent))
        #expect(PayloadShape.inspect(Array(#"{"aps":true}"#.utf8)) == .object(aps: .other))
        #expect(PayloadShape.inspect(Array("[]".utf8)) == .notObject)
        #expect(PayloadShape.inspect(Array("{".utf8)) == .notJSON)
    }
}
