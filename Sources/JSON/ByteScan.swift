// Eight bytes at a time for the scans that run over every string of every event and outcome: finding
// where a JSON string ends (or needs escaping) one byte at a time cost several percent of an event loop
// in `bench pipeline`. The tests are the classic SWAR ones ("Bit Twiddling Hacks", Sean Eron Anderson):
// exact for "is there any such byte in the word", and for where the first one lies.

/// Word-at-a-time tests for the bytes JSON strings care about.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether any byte of `word` is below 0x20 (a control character), `"` or `\`: a byte a JSON string
    /// must escape, or one that ends or escapes inside it.
    @inline(__always)
    static func hasQuoteBackslashOrControl(_ word: UInt64) -> Bool {
        quoteBackslashOrControlFlags(word) != 0
    }

    /// Where the first byte `hasQuoteBackslashOrControl` looks for lies in `word` (0 to 7, in memory order on
    /// this little-endian machine), or 8 when there is none: a string's scan jumps to its end in one step
    /// instead of testing the word again at each byte before it.
    @inline(__always)
    static func firstQuoteBackslashOrControl(_ word: UInt64) -> Int {
        quoteBackslashOrControlFlags(word).trailingZeroBitCount >> 3
    }

    /// The high bit of each byte of `word` that is a control character, `"` or `\`, and possibly of bytes
    /// above such a byte: each test's borrow runs from a matching byte towards higher ones, so a false flag
    /// can only lie above a true one, and the lowest flag is always a true one.
    @inline(__always)
    private static func quoteBackslashOrControlFlags(_ word: UInt64) -> UInt64 {
        // Below 0x20: the borrow of subtracting 0x20 reaches the high bit only for such bytes (and
        // bytes at or above 0x80 are excluded by `~word`).
        let control = (word &- ones &* 0x20) & ~word & highBits
        return control | zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5C))
    }

    /// The high bit of each byte of `word` that is zero, and possibly of bytes above such a byte.
    @inline(__always)
    private static func zeroBytes(_ word: UInt64) -> UInt64 {
        (word &- ones) & ~word & highBits
    }

    /// Whether any of the first `count` bytes of `word` (0 to 8, in memory order) is not ASCII.
    @inline(__always)
    static func hasNonASCII(_ word: UInt64, first count: Int) -> Bool {
        let kept: UInt64 = count >= 8 ? .max : (1 &<< UInt64(count &* 8)) &- 1
        return word & kept & highBits != 0
    }

    /// Whether `byte` is one `hasQuoteBackslashOrControl` looks for: the test for the bytes after the
    /// last whole word.
    @inline(__always)
    static func isQuoteBackslashOrControl(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// The eight bytes at `offset`, wherever they lie.
    @inline(__always)
    static func word(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64 {
        UnsafeRawPointer(bytes.baseAddress!).loadUnaligned(fromByteOffset: offset, as: UInt64.self)
    }
}
