// A tape reads every document as the value tree does: the same documents accepted, the same values, and the
// same errors (message, place and path) for the rest. Checked over seeded random documents and their
// corruptions (the seed is printed), and on the cases that differ by design.

import Foundation
import TestSupport
import Testing

@testable import JSON

@Suite struct JSONTapeTests {
    /// The tree parser as the worker reads events: no member named twice.
    static func tree(_ bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
        Result { () throws(JSONParseError) in
            try JSONValue(parsing: bytes, options: JSONParsingOptions(allowsDuplicateKeys: false, maximumDepth: 64))
        }
    }

    static func tape(_ bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
        Result { () throws(JSONParseError) in try JSONTape(parsing: bytes, maximumDepth: 64).value }
    }

    @Test func randomDocumentsAndTheirCorruptionsReadAsTheTreeReadsThem() {
        var generator = SeededGenerator.replayable("tape against tree")
        let seed = generator.state
        var accepted = 0
        var refused = 0
        for _ in 0..<3000 {
            let document = Self.randomValue(depth: 0, using: &generator)
            var bytes = document.compactBytes
            if Bool.random(using: &generator) { Self.corrupt(&bytes, using: &generator) }
            let tree = Self.tree(bytes)
            let tape = Self.tape(bytes)
            #expect(tree == tape, "seed \(seed): \(String(decoding: bytes, as: UTF8.self))")
            if case .success = tree { accepted += 1 } else { refused += 1 }
        }
        // Both sides of the comparison were exercised.
        #expect(accepted > 500 && refused > 500, "seed \(seed): \(accepted) accepted, \(refused) refused")
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"x":{"b":[1,{"c":"d","c":"e"}]}}"#, #"{"é":1,"\u00e9":2}"#, #"[{"k":1},{"k":2,"k":3}]"#,
        #"{"a\"b":1,"a\u0022b":2}"#,
        // One text, canonically, in two orders of its combining marks (the same length in bytes).
        "{\"s\u{323}\u{307}\":1,\"s\u{307}\u{323}\":2}",
        // The same, the first name written with escapes.
        #"{"s\u0323\u0307":1,"# + "\"s\u{307}\u{323}\":2}",
    ])
    func aNameGivenTwiceIsRefusedWhereTheTreeRefusesIt(document: String) {
        let bytes = Array(document.utf8)
        let tape = Self.tape(bytes)
        #expect(tape == Self.tree(bytes))
        guard case .failure(let error) = tape else {
            Issue.record("accepted \(document)")
            return
        }
        #expect(error.duplicateMemberName != nil)
    }

    @Test func nodesReadMembersElementsAndScalarsWhereTheyLie() throws {
        let text = #"""
            {"id":"evt-1","n":3,"d":2.0,"f":2.5,"t":true,"z":null,"esc":"a\"b\u00e9","devices":[{"token":"ab"},
            {"token":"cd","environment":"sandbox"}],"data":{"sender":{"name":"Léa"}},"empty":{},"none":[]}
            """#
        let tape = try JSONTape(parsing: Array(text.utf8))
        tape.withRoot { root in
            #expect(root.isObject && root.count == 11)
            #expect(root["id"]?.stringValue == "evt-1")
            #expect(root["id"]?.plainTextBytes.map { Array($0) } == Array("evt-1".utf8))
            #expect(root["n"]?.intValue == 3 && root["d"]?.intValue == 2 && root["f"]?.intValue == nil)
            #expect(root["f"]?.doubleValue == 2.5 && root["t"]?.boolValue == true && root["z"]?.isNull == true)
            #expect(root["esc"]?.stringValue == "a\"bé" && root["esc"]?.plainTextBytes == nil)
            #expect(root["esc"]?.withUTF8 { Array($0) } == Array("a\"bé".utf8))
            #expect(root["missing"] == nil && root["id"]?["id"] == nil)
            let devices = root["devices"]
            #expect(devices?.count == 2)
            #expect(devices?.elements.map { $0["token"]?.stringValue } == ["ab", "cd"])
            #expect(devices?.element(at: 1)?["environment"]?.stringValue == "sandbox")
            #expect(devices?.element(at: 2) == nil)
            #expect(root["data"]?["sender"]?["name"]?.stringValue == "Léa")
            #expect(root["empty"]?.count == 0 && root["none"]?.elements.map { $0 }.isEmpty == true)
            #expect(root["n"]?.typeName == JSONValue.int(3).typeName)
            var names: [String] = []
            root.forEachMember { name, _ in
                names.append(name.stringValue ?? "")
                return names.count < 3
            }
            #expect(names == ["id", "n", "d"])
        }
        #expect(tape.value == (try JSONValue(parsing: text)))
        // A tape of a value reads as the value (whole doubles aside: the writer writes 2.0 as 2).
        let value: JSONValue = ["a": [1, "b\"é", ["c": nil]], "d": true]
        #expect(JSONTape(value).value == value)
        #expect(JSONTape.null.value == .null)
    }

    // MARK: - Random documents

    static func randomValue(depth: Int, using generator: inout SeededGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth > 3 ? 6 : 8), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int64.random(in: -1_000_000_000_000...1_000_000_000_000, using: &generator))
        case 3: return .double(Double(Int.random(in: -100_000...100_000, using: &generator)) / 64)
        case 4, 5: return .string(randomString(using: &generator))
        case 6:
            return .array(
                (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                    randomValue(depth: depth + 1, using: &generator)
                })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...5, using: &generator) {
                object[randomString(using: &generator)] = randomValue(depth: depth + 1, using: &generator)
            }
            return .object(object)
        }
    }

    static let pieces: [String] = [
        "a", "id", "token", "é", "😀", "\"", "\\", "\n", "\u{01}", "/", "0123456789abcdef", "佐藤", " ", "a\u{301}",
    ]

    static func randomString(using generator: inout SeededGenerator) -> String {
        (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    /// One to three changes: a byte replaced, removed or inserted, from the bytes JSON is made of.
    static func corrupt(_ bytes: inout [UInt8], using generator: inout SeededGenerator) {
        let alphabet = Array(#"{}[]:,"\ u0aeE.-+9tfn"#.utf8) + [0x01, 0xC3, 0x28, 0xFF, 0x80]
        for _ in 0..<Int.random(in: 1...3, using: &generator) {
            guard !bytes.isEmpty else { return }
            let at = Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: bytes[at] = alphabet.randomElement(using: &generator)!
            case 1: bytes.remove(at: at)
            default: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
            }
        }
    }
}
