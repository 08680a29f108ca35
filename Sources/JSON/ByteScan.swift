// Eight bytes at a time for the scans that run over every string of every event and outcome: finding
// where a JSON string ends (or needs escaping) one byte at a time cost several percent of an event loop
// in `bench pipeline`. The tests are the classic SWAR ones ("Bit Twiddling Hacks", Sean Eron Anderson):
// exact for "is there any such byte in the word", which is all a skip needs.

/// Word-at-a-time tests for the bytes JSON strings care about.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether any byte of `word` is zero.
    @inline(__always)
    private static func hasZeroByte(_ word: UInt64) -> Bool {
        (word &- ones) & ~word & highBits != 0
    }

    /// Whether any byte of `word` is below 0x20 (a control character), `"` or `\`: a byte a JSON string
    /// must escape, or one that ends or escapes inside it.
    @inline(__always)
    static func hasQuoteBackslashOrControl(_ word: UInt64) -> Bool {
        // Below 0x20: the borrow of subtracting 0x20 reaches the high bit only for such bytes (and
        // bytes at or above 0x80 are excluded by `~word`).
        let control = (word &- ones &* 0x20) & ~word & highBits
        return control != 0 || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
    }

    /// Whether `byte` is one `hasQuoteBackslashOrControl` looks for: the test for the bytes after the
    /// last whole word.
    @inline(__always)
    static func isQuoteBackslashOrControl(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Whether any byte of `word` is at or above 0x80 (not ASCII).
    @inline(__always)
    static func hasNonASCII(_ word: UInt64) -> Bool {
        word & highBits != 0
    }

    /// The eight bytes at `offset`, wherever they lie.
    @inline(__always)
    static func word(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64 {
        UnsafeRawPointer(bytes.baseAddress!).loadUnaligned(fromByteOffset: offset, as: UInt64.self)
    }
}
