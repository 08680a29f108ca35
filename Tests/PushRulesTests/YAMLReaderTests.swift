// The YAML reader: positions of every node, YAML 1.1 scalar resolution, aliases with a budget,
// and JSON read through the same path.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct YAMLReaderTests {
    static func read(_ text: String) throws -> SourceNode {
        try YAMLReader.read(Array(text.utf8))
    }

    @Test func keepsTheLineAndColumnOfEveryNode() throws {
        let root = try Self.read(
            """
            a: 1
            b:
              - x
              - {c: "d"}
            """)
        #expect(root.position == SourcePosition(line: 1, column: 1))
        #expect(root.entry("a")?.keyPosition == SourcePosition(line: 1, column: 1))
        #expect(root.entry("a")?.value.position == SourcePosition(line: 1, column: 4))
        let list = try #require(root.entry("b")?.value.elements)
        #expect(list[0].position == SourcePosition(line: 3, column: 5))
        #expect(list[1].entry("c")?.value.position == SourcePosition(line: 4, column: 9))
        #expect(list[1].entry("c")?.value.end == SourcePosition(line: 4, column: 12))
    }

    @Test(arguments: [
        ("~", JSONValue.null), ("null", .null), ("", .null), ("true", .bool(true)), ("False", .bool(false)),
        ("yes", .bool(true)), ("off", .bool(false)), ("42", .int(42)), ("-7", .int(-7)), ("+3", .int(3)),
        ("1_000", .int(1000)), ("0x1F", .int(31)), ("0o17", .int(15)), ("1.5", .double(1.5)), ("-.5", .double(-0.5)),
        ("1e3", .double(1000)), ("6.02E+23", .double(6.02e23)),
        ("9223372036854775808", .double(9.223372036854775808e18)),
        ("0755", .string("0755")), ("1:30", .string("1:30")), (".inf", .string(".inf")), (".nan", .string(".nan")),
        ("1.2.3", .string("1.2.3")), ("-x", .string("-x")), ("+.", .string("+.")), ("y", .string("y")),
        ("n", .string("n")),
        ("chat.message", .string("chat.message")), ("1h", .string("1h")),
    ])
    func resolvesPlainScalarsAsYAML11Does(text: String, expected: JSONValue) throws {
        #expect(try Self.read("v: \(text)").entry("v")?.value.scalarValue == expected)
    }

    @Test func quotedBlockAndTaggedScalarsStayText() throws {
        let root = try Self.read(
            """
            a: "true"
            b: '42'
            c: !!str 3.5
            d: |
              multi
              line
            e: !!int "12"
            f: !!float 2
            """)
        #expect(root.entry("a")?.value.scalarValue == "true")
        #expect(root.entry("b")?.value.scalarValue == "42")
        #expect(root.entry("c")?.value.scalarValue == "3.5")
        #expect(root.entry("d")?.value.scalarValue == "multi\nline\n")
        #expect(root.entry("e")?.value.scalarValue == .int(12))
        #expect(root.entry("f")?.value.scalarValue == .double(2))
        #expect(throws: YAMLSyntaxError.self) { try Self.read("a: !!int nope") }
        #expect(throws: YAMLSyntaxError.self) { try Self.read("a: !custom x") }
    }

    @Test func aliasesAreExpanded() throws {
        let root = try Self.read(
            """
            base: &b {x: 1, y: [a, b]}
            copy: *b
            """)
        #expect(root.entry("copy")?.value.json == ["x": 1, "y": ["a", "b"]])
        #expect(root.entry("copy")?.value.position == SourcePosition(line: 2, column: 7))
    }

    @Test func aBillionLaughsDocumentIsRefused() {
        var text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        var previous = "a"
        for name in ["b", "c", "d", "e", "f", "g"] {
            text += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]\n"
            previous = name
        }
        #expect {
            _ = try Self.read(text)
        } throws: { error in
            (error as? YAMLSyntaxError)?.message.contains("expands to more than 200000 nodes") == true
        }
    }

    @Test func deepNestingIsRefused() {
        let text = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect {
            _ = try Self.read(text)
        } throws: { error in
            (error as? YAMLSyntaxError)?.message == "nesting deeper than 64 levels"
        }
    }

    @Test func invalidUTF8IsRefusedWithItsOffset() {
        #expect {
            _ = try YAMLReader.read(Array("a: ok\nb: ".utf8) + [0xFF, 0xFE] + Array("\n".utf8))
        } throws: { error in
            (error as? YAMLSyntaxError)?.message.contains("at byte 9; a rules file must be UTF-8 text") == true
        }
    }

    @Test func readsJSONWithPositions() throws {
        let root = try Self.read("{\"a\":1,\"b\":[true,\"x\"],\n \"c\":{\"d\":null}}")
        #expect(root.json == ["a": 1, "b": [true, "x"], "c": ["d": .null]])
        #expect(root.entry("c")?.value.entry("d")?.keyPosition == SourcePosition(line: 2, column: 7))
        #expect(root.entry("c")?.value.entry("d")?.value.position == SourcePosition(line: 2, column: 11))
    }
}
