// The byte checks the hot paths share: hex digit values and byte equality.

import APNs
import Testing

@Suite struct ASCIIBytesTests {
    @Test func hexValueKnowsEveryByte() {
        for byte in UInt8.min...UInt8.max {
            let expected: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): expected = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): expected = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): expected = byte - UInt8(ascii: "A") + 10
            default: expected = 0xFF
            }
            #expect(ASCIIBytes.hexValue(byte) == expected, "byte \(byte)")
        }
    }

    @Test func equalComparesLengthAndBytes() {
        func equal(_ first: [UInt8], _ second: [UInt8]) -> Bool {
            first.withUnsafeBufferPointer { a in second.withUnsafeBufferPointer { b in ASCIIBytes.equal(a, b) } }
        }
        #expect(equal([], []))
        #expect(equal(Array("apns-id".utf8), Array("apns-id".utf8)))
        #expect(!equal(Array("apns-id".utf8), Array("apns-ie".utf8)))
        #expect(!equal(Array("apns-id".utf8), Array("apns-i".utf8)))
        #expect(!equal([], [0]))
        #expect(Array(":path".utf8).withUnsafeBufferPointer { ASCIIBytes.equal($0, ":path") })
        #expect(!Array(":pat".utf8).withUnsafeBufferPointer { ASCIIBytes.equal($0, ":path") })
    }
}
