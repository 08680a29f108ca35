// Byte-level checks for per-request hot paths (headers, ids, tokens). Written out by hand: the generic
// `elementsEqual` over a `String.UTF8View` and range patterns such as `case 0x30...0x39` compiled to
// protocol-witness calls per byte, several percent of a sender's or the simulator's thread.

#if canImport(Glibc)
import Glibc
#endif

public enum ASCIIBytes {
    /// Whether `first` and `second` hold the same bytes (memcmp).
    public static func equal(_ first: UnsafeBufferPointer<UInt8>, _ second: UnsafeBufferPointer<UInt8>) -> Bool {
        guard first.count == second.count else { return false }
        guard let firstStart = first.baseAddress, let secondStart = second.baseAddress else { return true }
        return memcmp(firstStart, secondStart, first.count) == 0
    }

    /// Whether `bytes` are exactly the literal's.
    public static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        equal(bytes, UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// The value of a hex digit of either case (0-15), or 0xFF for any other byte. Branch-free, so callers
    /// can check a whole run of digits with one test at the end.
    @inline(__always)
    public static func hexValue(_ byte: UInt8) -> UInt8 {
        let digit = byte &- UInt8(ascii: "0")
        let letter = (byte | 0x20) &- UInt8(ascii: "a")  // either case
        // Masks, not a choice between the three: the nested `?:` compiled to a branch per byte, and the
        // digits and letters of an id or a token alternate at random (a mispredicted branch every few
        // bytes: docs/performance.md, 2026-12-07).
        let isDigit: UInt8 = digit < 10 ? 0xFF : 0
        let isLetter: UInt8 = letter < 6 ? 0xFF : 0
        return (digit & isDigit) | ((letter &+ 10) & isLetter) | ~(isDigit | isLetter)
    }
}
