// Compact JSON output: no insignificant whitespace, non-ASCII kept as UTF-8, so the byte count is
// the one APNs measures against its payload limit.

extension JSONValue {
    /// The compact UTF-8 JSON encoding of this value.
    public var compactBytes: [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        JSONWriter.write(self, into: &output)
        return output
    }

    /// The compact JSON encoding as a string.
    public var compactString: String { String(decoding: compactBytes, as: UTF8.self) }

    /// The size in bytes of the compact encoding.
    public var compactByteCount: Int { compactBytes.count }
}

/// Writes JSON values into a byte buffer.
public enum JSONWriter {
    public static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let b): output.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): writeInteger(i, into: &output)
        case .double(let d): writeDouble(d, into: &output)
        case .string(let s): writeString(s, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(member.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    static func writeInteger(_ value: Int64, into output: inout [UInt8]) {
        if value >= 0 && value < 10 {
            output.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        withIntegerText(value) { output.append(contentsOf: $0) }
    }

    /// Calls `body` with the decimal text of `value`, made in a 24-byte scratch tuple: no String is made
    /// for a number.
    static func withIntegerText(_ value: Int64, _ body: (UnsafeRawBufferPointer) -> Void) {
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { scratch in
            var start = scratch.count
            repeat {
                start -= 1
                scratch[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                scratch[start] = UInt8(ascii: "-")
            }
            body(UnsafeRawBufferPointer(rebasing: scratch[start...]))
        }
    }

    static func writeDouble(_ value: Double, into output: inout [UInt8]) {
        withDoubleText(value) { output.append(contentsOf: $0) }
    }

    /// Calls `body` with the JSON text of `value`.
    static func withDoubleText(_ value: Double, _ body: (UnsafeRawBufferPointer) -> Void) {
        // JSON has no NaN or infinity; they can only arise from arithmetic in templates.
        guard value.isFinite else {
            let literal: StaticString = "null"
            literal.withUTF8Buffer { body(UnsafeRawBufferPointer($0)) }
            return
        }
        if value.rounded() == value, abs(value) < 1e15 {
            // Whole numbers print without a fraction ("3", not "3.0"), as a JSON producer would.
            withIntegerText(Int64(value), body)
            return
        }
        var text = value.description
        text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    public static func writeString(_ string: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        writeStringContents(string, into: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// Whether `bytes`, as the text of a JSON string, needs any escaping (a quote, a backslash or a
    /// control character).
    public static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while bytes.count - index >= 8 {
            if ByteScan.hasQuoteBackslashOrControl(ByteScan.word(bytes, at: index)) { return true }
            index += 8
        }
        while index < bytes.count {
            if ByteScan.isQuoteBackslashOrControl(bytes[index]) { return true }
            index += 1
        }
        return false
    }

    /// What `writeString` writes between the quotes: the text, escaped.
    public static func writeStringContents(_ string: String, into output: inout [UInt8]) {
        string.withUTF8Bytes { bytes in
            var runStart = 0
            var index = 0
            while index < bytes.count {
                // Eight bytes that need no escaping are copied with the run they belong to.
                if bytes.count - index >= 8, !ByteScan.hasQuoteBackslashOrControl(ByteScan.word(bytes, at: index)) {
                    index += 8
                    continue
                }
                let byte = bytes[index]
                index += 1
                guard ByteScan.isQuoteBackslashOrControl(byte) else { continue }
                if runStart < index - 1 {
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index - 1]))
                }
                runStart = index
                output.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                case 0x08: output.append(UInt8(ascii: "b"))
                case 0x0C: output.append(UInt8(ascii: "f"))
                default:
                    output.append(contentsOf: "u00".utf8)
                    output.append(hexDigits[Int(byte >> 4)])
                    output.append(hexDigits[Int(byte & 0x0F)])
                }
            }
            if runStart < bytes.count {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
            }
        }
    }
}
