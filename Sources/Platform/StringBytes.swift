// A string's UTF-8 bytes without copying the string: `withUTF8` is a mutating method, so reading a `let`
// through it takes a copy first, a retain and a release of a native string's storage for every call.
// JSON, which may not depend on this module (scripts/lint.sh), keeps the same helper internally.

extension String {
    /// Calls `body` with the string's UTF-8 bytes: a native string's own, read where they are; a bridged
    /// or otherwise non-contiguous one's made contiguous on a copy first.
    @inlinable
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
