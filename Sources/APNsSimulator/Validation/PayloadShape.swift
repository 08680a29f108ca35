// Checks a payload's JSON syntax and whether its top level is an object with an `aps` dictionary,
// without building values: the simulator needs only that answer per request, and building the whole
// JSONValue was its costliest step. Grammar as RFC 8259 (what the APNs module's JSON parser accepts);
// a differential test keeps the two in agreement.

import APNs
import JSON

/// What a payload is, as far as APNs' "a JSON object with aps" rule goes.
enum PayloadShape: Sendable, Hashable {
    /// Not JSON (or nested deeper than `maximumDepth`).
    case notJSON
    /// Valid JSON, but not an object.
    case notObject
    /// An object; `aps` says what its `aps` member is.
    case object(aps: APSMember)

    enum APSMember: Sendable, Hashable {
        case absent
        case dictionary
        case other
    }

    /// The same nesting limit as `JSONValue(parsing:)`.
    static let maximumDepth = 128

    static func inspect(_ bytes: [UInt8]) -> PayloadShape {
        let (shape, ambiguous) = bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            let shape = scanner.document()
            return (shape, scanner.escapedTopLevelKey || scanner.apsKeys > 1)
        }
        guard ambiguous, case .object = shape else { return shape }
        // A top-level key written with escapes, or "aps" twice: let the full parser decide.
        guard case .object(let root)? = try? JSONValue(parsing: bytes) else { return .notJSON }
        switch root["aps"] {
        case nil: return .object(aps: .absent)
        case .object?: return .object(aps: .dictionary)
        default: return .object(aps: .other)
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var aps = APSMember.absent
        /// A top-level key was written with escapes: it might spell "aps", so the caller must decide
        /// with the full parser.
        var escapedTopLevelKey = false
        /// How many top-level keys spelled `aps` without escapes.
        var apsKeys = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func document() -> PayloadShape {
            skipWhitespace()
            guard index < bytes.count else { return .notJSON }
            let isObject = bytes[index] == UInt8(ascii: "{")
            guard value(depth: 0) else { return .notJSON }
            skipWhitespace()
            guard index == bytes.count else { return .notJSON }
            return isObject ? .object(aps: aps) : .notObject
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) -> Bool {
            guard depth < PayloadShape.maximumDepth, index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object(depth: depth + 1)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""): return string().valid
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func object(depth: Int) -> Bool {
            index += 1  // {
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
                let keyStart = index + 1
                let key = string()
                guard key.valid else { return false }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                guard index < bytes.count else { return false }
                if depth == 1 {
                    if key.escaped {
                        escapedTopLevelKey = true
                    } else if isAPS(from: keyStart) {
                        apsKeys += 1
                        aps = bytes[index] == UInt8(ascii: "{") ? .dictionary : .other
                    }
                }
                guard value(depth: depth) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return false }
                index += 1
                return true
            }
        }

        /// True when the key starting at `start` (after its quote) is exactly `aps`.
        func isAPS(from start: Int) -> Bool {
            start + 4 <= bytes.count && bytes[start] == UInt8(ascii: "a") && bytes[start + 1] == UInt8(ascii: "p")
                && bytes[start + 2] == UInt8(ascii: "s") && bytes[start + 3] == UInt8(ascii: "\"")
        }

        mutating func array(depth: Int) -> Bool {
            index += 1  // [
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard value(depth: depth) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { return false }
                index += 1
                return true
            }
        }

        /// Skips a string; `escaped` tells whether it held a backslash escape.
        mutating func string() -> (valid: Bool, escaped: Bool) {
            index += 1  // opening quote
            var escaped = false
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return (true, escaped)
                case UInt8(ascii: "\\"):
                    escaped = true
                    guard index < bytes.count else { return (false, escaped) }
                    let next = bytes[index]
                    index += 1
                    switch next {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        continue
                    case UInt8(ascii: "u"):
                        guard index + 4 <= bytes.count,
                            (0..<4).allSatisfy({ Self.isHexDigit(bytes[index + $0]) })
                        else { return (false, escaped) }
                        index += 4
                    default:
                        return (false, escaped)
                    }
                case 0x00..<0x20:
                    return (false, escaped)
                default:
                    continue
                }
            }
            return (false, escaped)
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func number() -> Bool {
            if index < bytes.count && bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { return false }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                guard digits() else { return false }
            }
            if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() else { return false }
            }
            if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
                index += 1
                if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                    index += 1
                }
                guard digits() else { return false }
            }
            return true
        }

        /// One or more decimal digits.
        mutating func digits() -> Bool {
            let start = index
            while index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            return index > start
        }

        static func isHexDigit(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
        }
    }
}
