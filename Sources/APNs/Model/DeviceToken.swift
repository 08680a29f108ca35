// A device token as APNs wants it in the request path: lowercase hex of a sane length. People paste
// tokens in many shapes (Xcode's `<0a1b 2c3d ...>`, upper case, wrapped lines), so those are
// normalised; anything else is refused with what was wrong, never guessed at.

/// The address of one app on one device, as lowercase hex.
///
/// Apple's tokens are 32 bytes (64 hex digits) today; Apple has said they may grow, up to 100 bytes.
/// `byteCountRange` therefore accepts 32...100 bytes: anything shorter has never been a real token
/// and is almost always a truncated copy, which is worth an error rather than a 400 from Apple.
public struct DeviceToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The token's length in bytes that this type accepts.
    public static let byteCountRange: ClosedRange<Int> = 32...100

    /// Lowercase hex digits, an even number of them, `2 * byteCountRange` long.
    public let hex: String

    /// Normalises and checks a token as a person or an upstream service wrote it.
    ///
    /// Removes spaces, tabs, line breaks (and other Unicode white space, zero-width spaces and
    /// byte-order marks) and the angle brackets of `NSData`'s description, and lower-cases A-F.
    /// Throws, naming what is wrong, if the token is empty, has a character that is not a hex digit
    /// (with its 1-based position in `raw`), has an odd number of digits, or is too short or too long.
    public init(_ raw: String) throws(APNsRequestError) {
        // Fast path for what services send: already lowercase hex, nothing to copy.
        let clean =
            raw.utf8.withContiguousStorageIfAvailable { bytes in
                for byte in bytes where !DeviceToken.isLowerHex(byte) { return false }
                return true
            } ?? false
        if clean {
            try DeviceToken.checkDigitCount(raw.utf8.count)
            hex = raw
            return
        }
        var digits: [UInt8] = []
        digits.reserveCapacity(raw.utf8.count)
        var position = 0
        for scalar in raw.unicodeScalars {
            position += 1
            let value = scalar.value
            if value < 0x80, DeviceToken.isLowerHex(UInt8(value)) {
                digits.append(UInt8(value))
            } else if value >= 0x41 && value <= 0x46 {
                digits.append(UInt8(value) + 0x20)
            } else if value == 0x3C || value == 0x3E || value == 0x200B || value == 0xFEFF
                || scalar.properties.isWhitespace
            {
                continue
            } else {
                throw APNsRequestError(
                    .deviceTokenNotHex, field: "device-token",
                    "\(DeviceToken.describe(scalar)) at position \(position) is not a hex digit; a device token is "
                        + "hex digits 0-9 and a-f (64 of them for today's 32-byte tokens)")
            }
        }
        try DeviceToken.checkDigitCount(digits.count)
        hex = String(decoding: digits, as: UTF8.self)
    }

    /// A token from its raw bytes (what iOS hands the app as `Data`).
    public init(bytes: some Collection<UInt8>) throws(APNsRequestError) {
        try DeviceToken.checkDigitCount(bytes.count * 2)
        var digits: [UInt8] = []
        digits.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            digits.append(DeviceToken.hexDigits[Int(byte >> 4)])
            digits.append(DeviceToken.hexDigits[Int(byte & 0x0F)])
        }
        hex = String(decoding: digits, as: UTF8.self)
    }

    /// For stand-ins and tests that already know `hex` is valid.
    init(uncheckedHex hex: String) { self.hex = hex }

    /// The token's bytes.
    public var bytes: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8 = 0
        for (index, byte) in hex.utf8.enumerated() {
            let nibble = byte <= 0x39 ? byte - 0x30 : byte - 0x61 + 10
            if index & 1 == 0 { high = nibble << 4 } else { result.append(high | nibble) }
        }
        return result
    }

    /// The length in bytes.
    public var byteCount: Int { hex.utf8.count / 2 }

    public var description: String { hex }

    public static func < (lhs: DeviceToken, rhs: DeviceToken) -> Bool { lhs.hex < rhs.hex }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    @inline(__always) static func isLowerHex(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66)
    }

    static func checkDigitCount(_ count: Int) throws(APNsRequestError) {
        let minimum = byteCountRange.lowerBound
        let maximum = byteCountRange.upperBound
        if count == 0 {
            throw APNsRequestError(
                .deviceTokenEmpty, field: "device-token",
                "the device token is empty; give the hex token the app got from registerForRemoteNotifications "
                    + "(64 hex digits today)")
        }
        if count % 2 != 0 {
            throw APNsRequestError(
                .deviceTokenOddLength, field: "device-token",
                "the device token has \(count) hex digits, an odd number, so a digit is missing or extra; "
                    + "a token is whole bytes, two hex digits each (64 digits today)")
        }
        if count < minimum * 2 {
            throw APNsRequestError(
                .deviceTokenTooShort, field: "device-token",
                "the device token has \(count) hex digits (\(count / 2) bytes); device tokens are at least "
                    + "\(minimum) bytes (\(minimum * 2) hex digits), so this one looks cut short")
        }
        if count > maximum * 2 {
            throw APNsRequestError(
                .deviceTokenTooLong, field: "device-token",
                "the device token has \(count) hex digits (\(count / 2) bytes); device tokens are at most "
                    + "\(maximum) bytes (\(maximum * 2) hex digits), so this is probably not one token")
        }
    }

    /// A character for an error message: itself when visible, else its code point.
    static func describe(_ scalar: Unicode.Scalar) -> String {
        if scalar.value >= 0x21 && scalar.value < 0x7F { return "'\(Character(scalar))'" }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        if scalar.value >= 0x80, !scalar.properties.isWhitespace, scalar.properties.generalCategory != .control,
            scalar.properties.generalCategory != .format
        {
            return "'\(Character(scalar))' (\(code))"
        }
        return code
    }
}
