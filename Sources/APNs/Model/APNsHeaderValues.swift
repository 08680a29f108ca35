// Small value types for the apns-expiration, apns-collapse-id and apns-id headers, each checked
// when made so that a request holding them renders valid headers.

import Platform
import Synchronization

/// The apns-expiration header: until when APNs keeps trying to deliver.
public enum APNsExpiration: Sendable, Hashable, CustomStringConvertible {
    /// No header: APNs stores the notification for its default period.
    case none
    /// `0`: try once now; if the device is offline, drop it.
    case immediately
    /// Keep trying until this time, in UNIX seconds (UTC).
    case at(Int64)

    /// `0` is `.immediately`, anything else `.at(seconds)`.
    public init(unixSeconds: Int64) {
        self = unixSeconds == 0 ? .immediately : .at(unixSeconds)
    }

    /// Parses the header value: `0` or a whole number of UNIX seconds.
    public init(parsing text: String) throws(APNsRequestError) {
        // Plain digits parse directly; only stray white space pays for the Character walk.
        guard let seconds = Int64(text) ?? Int64(text.filter { !$0.isWhitespace }) else {
            throw APNsRequestError(
                .expirationInvalid, field: "apns-expiration",
                "'\(text)' is not an expiration; use 0 (try once, do not store) or a time in UNIX seconds")
        }
        if let problem = APNsExpiration.problem(seconds) { throw problem }
        self.init(unixSeconds: seconds)
    }

    /// The header value, or nil when the header is left out.
    public var headerValue: String? {
        switch self {
        case .none: return nil
        case .immediately: return "0"
        case .at(let seconds): return String(seconds)
        }
    }

    /// The UNIX time in seconds APNs stops trying at; nil for `.none`, 0 for `.immediately`.
    public var unixSeconds: Int64? {
        switch self {
        case .none: return nil
        case .immediately: return 0
        case .at(let seconds): return seconds
        }
    }

    public var description: String { headerValue ?? "none" }

    /// Seconds from 10^11 on (the year 5138) are milliseconds by mistake; APNs counts in seconds.
    static let millisecondsThreshold: Int64 = 100_000_000_000

    /// What is wrong with an expiration in seconds, if anything.
    static func problem(_ seconds: Int64) -> APNsRequestError? {
        if seconds < 0 {
            return APNsRequestError(
                .expirationInvalid, field: "apns-expiration",
                "\(seconds) is negative; use 0 (try once, do not store) or a time in UNIX seconds")
        }
        if seconds >= millisecondsThreshold {
            return APNsRequestError(
                .expirationInvalid, field: "apns-expiration",
                "\(seconds) looks like milliseconds; APNs wants UNIX seconds (\(seconds / 1000))")
        }
        return nil
    }
}

/// The apns-collapse-id header: notifications with the same id replace each other on the device.
public struct CollapseID: Sendable, Hashable, CustomStringConvertible {
    /// The most UTF-8 bytes APNs accepts.
    public static let maximumByteCount = 64

    /// The header value: 1...64 bytes of UTF-8, no control characters.
    public let value: String

    /// Checks the value: not empty, at most 64 bytes of UTF-8 (a CJK character takes 3, most
    /// emoji 4), and no control characters, which cannot go into an HTTP header.
    public init(_ value: String) throws(APNsRequestError) {
        let count = value.utf8.count
        if count == 0 {
            throw APNsRequestError(
                .collapseIDEmpty, field: "apns-collapse-id",
                "the collapse id is empty; leave it out, or give 1 to 64 bytes such as the event id")
        }
        if count > CollapseID.maximumByteCount {
            throw APNsRequestError(
                .collapseIDTooLong, field: "apns-collapse-id",
                "the collapse id is \(count) bytes of UTF-8; APNs accepts at most \(CollapseID.maximumByteCount) "
                    + "(\(count - CollapseID.maximumByteCount) over; non-ASCII characters take 2 to 4 bytes each)")
        }
        // Over the contiguous bytes rather than stepping through `value.utf8`, which checks the string's form
        // at every byte: every request with a collapse id passes here.
        if let byte = value.withUTF8Bytes({ bytes in bytes.first { $0 < 0x20 || $0 == 0x7F } }) {
            throw APNsRequestError(
                .collapseIDInvalidCharacter, field: "apns-collapse-id",
                "the collapse id holds the control character 0x\(String(byte, radix: 16)), which cannot go "
                    + "into an HTTP header; use printable text")
        }
        self.value = value
    }

    public var description: String { value }
}

/// The apns-id header: a UUID naming one attempt; APNs echoes it back in its response.
///
/// Stored as 16 bytes; `string` is the canonical lowercase 8-4-4-4-12 form sent on the wire.
public struct APNsID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The first 8 bytes, big-endian.
    public let high: UInt64
    /// The last 8 bytes, big-endian.
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh random-looking (version 4) UUID. Call once per attempt.
    ///
    /// The sender makes one per request, tens of thousands a second, and the system generator
    /// costs a system call per draw; an apns-id needs to be unique, not secret. So ids come from a
    /// process-wide counter run through SplitMix64-style mixing (bijections) under two keys drawn
    /// once from the system's secure generator. The low 62 bits are a bijection of the counter, so
    /// ids never repeat within a process (for 2^62 calls); across processes they are as unlikely to
    /// collide as random UUIDs.
    ///
    /// - Important: Thread-safe and lock-free; each call returns a new id.
    public static func random() -> APNsID {
        let count = IDStream.counter.add(1, ordering: .relaxed).newValue
        let high = IDStream.mix(count &+ IDStream.keys.high) & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000
        let low = IDStream.mix62(count &+ IDStream.keys.low) | 0x8000_0000_0000_0000
        return APNsID(high: high, low: low)
    }

    /// A random (version 4) UUID from the given generator; for tests that need repeatable ids.
    public static func random(using generator: inout some RandomNumberGenerator) -> APNsID {
        let high = (generator.next() as UInt64) & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000
        let low = (generator.next() as UInt64) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        return APNsID(high: high, low: low)
    }

    /// Parses a UUID in the 8-4-4-4-12 form, either case (APNs answers in upper case).
    public init(parsing text: String) throws(APNsRequestError) {
        guard let id = APNsID.parse(text.utf8) else {
            throw APNsRequestError(
                .apnsIDInvalid, field: "apns-id",
                "'\(text)' is not a UUID; use the 8-4-4-4-12 hex form such as 123e4567-e89b-42d3-a456-426614174000, "
                    + "or leave it out to get a fresh one")
        }
        self = id
    }

    static func parse(_ text: String.UTF8View) -> APNsID? {
        // Servers and the simulator parse one per request: walk contiguous bytes when the string has them.
        text.withContiguousStorageIfAvailable { parse(bytes: $0) }
            ?? Array(text).withUnsafeBufferPointer { parse(bytes: $0) }
    }

    /// Parses the 8-4-4-4-12 form from raw bytes (a response header as received).
    static func parse(bytes: UnsafeBufferPointer<UInt8>) -> APNsID? {
        guard bytes.count == 36, let text = bytes.baseAddress,
            text[8] == UInt8(ascii: "-"), text[13] == UInt8(ascii: "-"),
            text[18] == UInt8(ascii: "-"), text[23] == UInt8(ascii: "-")
        else { return nil }
        // Every response's apns-id is parsed: fixed groups, no bounds checks, no branch per digit (a range
        // `switch` here compiled to generic `ClosedRange.contains` calls, visible in a sender's profile).
        var invalid = false
        func hex(_ start: Int, _ end: Int, into value: inout UInt64) {
            for index in start..<end {
                let nibble = ASCIIBytes.hexValue(text[index])
                invalid = invalid || nibble > 15
                value = value << 4 | UInt64(nibble & 0x0F)
            }
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        hex(0, 8, into: &high)
        hex(9, 13, into: &high)
        hex(14, 18, into: &high)
        hex(19, 23, into: &low)
        hex(24, 36, into: &low)
        return invalid ? nil : APNsID(high: high, low: low)
    }

    /// The canonical lowercase form, 36 characters.
    public var string: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            write(into: buffer)
            return Self.textLength
        }
    }

    /// The length of the text form.
    static let textLength = 36

    /// Writes the canonical lowercase form into the first 36 bytes of `buffer`.
    ///
    /// Twice per push (its request's header and its outcome record): two digits at a time from a table,
    /// the dashes at their fixed places, where a loop over the 32 digits tested for a dash and picked the
    /// word at each one (1.3% of an event loop's samples in `bench pipeline`, docs/performance.md).
    func write(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        precondition(buffer.count >= Self.textLength)
        let target = UnsafeMutableRawPointer(buffer.baseAddress!)
        Self.hexDigitPairs.withUTF8Buffer { pairs in
            let table = UnsafeRawPointer(pairs.baseAddress!)
            /// The `index`-th byte of `word` (0 the most significant) as its two digits at `offset`.
            func put(_ word: UInt64, _ index: UInt64, at offset: Int) {
                let byte = Int(truncatingIfNeeded: word >> (56 - 8 * index)) & 0xFF
                let digits = table.loadUnaligned(fromByteOffset: byte * 2, as: UInt16.self)
                target.storeBytes(of: digits, toByteOffset: offset, as: UInt16.self)
            }
            put(high, 0, at: 0)
            put(high, 1, at: 2)
            put(high, 2, at: 4)
            put(high, 3, at: 6)
            put(high, 4, at: 9)
            put(high, 5, at: 11)
            put(high, 6, at: 14)
            put(high, 7, at: 16)
            put(low, 0, at: 19)
            put(low, 1, at: 21)
            put(low, 2, at: 24)
            put(low, 3, at: 26)
            put(low, 4, at: 28)
            put(low, 5, at: 30)
            put(low, 6, at: 32)
            put(low, 7, at: 34)
        }
        let dash = UInt8(ascii: "-")
        target.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
        target.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
        target.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
        target.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
    }

    /// The two lowercase hex digits of every byte, 00 to ff, in order.
    private static let hexDigitPairs: StaticString = """
        000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f\
        303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f\
        606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f\
        909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf\
        c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef\
        f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff
        """

    public var description: String { string }

    public static func < (lhs: APNsID, rhs: APNsID) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }
}

/// The state behind `APNsID.random()`: a process-wide counter and two secret keys.
enum IDStream {
    static let counter = Atomic<UInt64>(0)
    static let keys: (high: UInt64, low: UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()

    /// SplitMix64's output function: a bijection on 64 bits that spreads every input bit.
    @inline(__always) static func mix(_ value: UInt64) -> UInt64 {
        var z = value &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The same mixing on 62-bit words (every step taken modulo 2^62), so the result leaves room
    /// for the UUID variant bits and is still a bijection of the input's low 62 bits.
    @inline(__always) static func mix62(_ value: UInt64) -> UInt64 {
        let mask: UInt64 = 0x3FFF_FFFF_FFFF_FFFF
        var z = (value &* 0x9E37_79B9_7F4A_7C15) & mask
        z = ((z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9) & mask
        z = ((z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB) & mask
        return z ^ (z >> 31)
    }
}
