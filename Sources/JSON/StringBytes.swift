// A string's UTF-8 bytes without copying the string, as Platform's `String.withUTF8Bytes` gives them to the
// modules above; JSON sits at the bottom of the module graph beside Platform (scripts/lint.sh), so it keeps
// its own. `withUTF8` is a mutating method: reading a `let` through it copies the string first, a retain and
// a release of its storage for every value written or parsed.

extension String {
    /// Calls `body` with the string's UTF-8 bytes: a native string's own, read where they are; a bridged
    /// or otherwise non-contiguous one's made contiguous on a copy first.
    @inline(__always)
    func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
