// The size of a payload's compact JSON encoding, counted without writing it: the request model
// needs the size to check the limit, and counting is cheaper than building the bytes.
import APNs

enum PayloadSize {
    /// Exactly `value.compactByteCount` (the tests hold the two equal).
    static func compactByteCount(of value: JSONValue) -> Int {
        switch value {
        case .null: return 4
        case .bool(let flag): return flag ? 4 : 5
        case .int(let int): return digitCount(int)
        case .double: return value.compactByteCount
        case .string(let string): return 2 + escapedByteCount(string)
        case .array(let elements):
            var total = 2 + max(0, elements.count - 1)
            for element in elements { total += compactByteCount(of: element) }
            return total
        case .object(let object):
            var total = 2 + max(0, object.count - 1)
            for member in object.members {
                total += 3 + escapedByteCount(member.key) + compactByteCount(of: member.value)
            }
            return total
        }
    }

    static func escapedByteCount(_ string: String) -> Int {
        var string = string
        return string.withUTF8 { bytes in
            var count = bytes.count
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                count += PayloadFitting.escapedByteCount(byte) - 1
            }
            return count
        }
    }

    static func digitCount(_ value: Int64) -> Int {
        if value == Int64.min { return 20 }
        var magnitude = value < 0 ? -value : value
        var count = value < 0 ? 2 : 1
        while magnitude >= 10 {
            magnitude /= 10
            count += 1
        }
        return count
    }
}
