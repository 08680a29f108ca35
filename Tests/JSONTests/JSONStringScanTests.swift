// Strings are scanned eight bytes at a time (ByteScan): every byte that ends, escapes or must be escaped in
// a JSON string is found at every position of a word, and a word's non-ASCII bytes still get validated.

import Testing

@testable import JSON

@Suite struct JSONStringScanTests {
    /// Each byte a JSON string treats specially, and bytes next to the SWAR tests' thresholds.
    static let probes: [UInt8] = [0x00, 0x01, 0x08, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F]

    /// The escaping one byte at a time, as the writer did before it scanned words.
    static func escapedByteByByte(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): output += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): output += Array(#"\\"#.utf8)
            case 0x0A: output += Array(#"\n"#.utf8)
            case 0x0D: output += Array(#"\r"#.utf8)
            case 0x09: output += Array(#"\t"#.utf8)
            case 0x08: output += Array(#"\b"#.utf8)
            case 0x0C: output += Array(#"\f"#.utf8)
            case ..<0x20: output += Array("\\u00".utf8) + Array(String(byte, radix: 16).leftPadded(to: 2).utf8)
            default: output.append(byte)
            }
        }
        return output
    }

    @Test(arguments: probes)
    func writesAndReadsBackEveryProbeAtEveryPositionOfStringsUpTo24Bytes(probe: UInt8) throws {
        for length in 1...24 {
            for position in 0..<length {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                bytes[position] = probe
                let text = String(decoding: bytes, as: UTF8.self)
                var written: [UInt8] = []
                JSONWriter.writeStringContents(text, into: &written)
                #expect(written == Self.escapedByteByByte(bytes), "length \(length), position \(position)")
                let read = try JSONValue(parsing: [UInt8(ascii: "\"")] + written + [UInt8(ascii: "\"")])
                #expect(read == .string(text), "length \(length), position \(position)")
            }
        }
    }

    @Test func findsTheClosingQuoteAtEveryPositionAndReadsWhatFollows() throws {
        for length in 0...24 {
            let text = String(repeating: "x", count: length)
            let value = try JSONValue(parsing: #"{"k":""# + text + #"","n":1}"#)
            #expect(value["k"] == .string(text))
            #expect(value["n"] == .int(1))
        }
    }

    @Test func rejectsAnUnescapedControlCharacterAtEveryPosition() {
        for length in 1...24 {
            for position in 0..<length {
                var bytes = Array(#"""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: length) + Array(#"""#.utf8)
                bytes[1 + position] = 0x1F
                #expect(throws: JSONParseError.self, "length \(length), position \(position)") {
                    try JSONValue(parsing: bytes)
                }
            }
        }
    }

    @Test func validatesNonASCIIBytesWhereverTheyFallInAWord() throws {
        for position in 0..<20 {
            var valid = Array(repeating: "a", count: 20)
            valid[position] = "é"
            let text = valid.joined()
            #expect(try JSONValue(parsing: "\"" + text + "\"") == .string(text))
            // A lone continuation byte: not UTF-8, wherever it is.
            var invalid = [UInt8](repeating: UInt8(ascii: "a"), count: 20)
            invalid[position] = 0x80
            #expect(throws: JSONParseError.self, "position \(position)") {
                try JSONValue(parsing: [UInt8(ascii: "\"")] + invalid + [UInt8(ascii: "\"")])
            }
        }
    }

    @Test func copiesLongPlainRunsAroundEscapesWhole() {
        let text = String(repeating: "abcdefgh", count: 5) + "\"" + String(repeating: "é", count: 9) + "\n"
        var written: [UInt8] = []
        JSONWriter.writeStringContents(text, into: &written)
        #expect(written == Self.escapedByteByByte(Array(text.utf8)))
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
