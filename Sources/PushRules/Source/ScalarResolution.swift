// YAML 1.1 resolution of plain (unquoted) scalars to null, booleans and numbers, as PyYAML and most
// Kubernetes tooling do, minus the parts that surprise people more than they help: sexagesimal
// numbers (`1:30`), leading-zero octals (`0755`) and `.inf`/`.nan` (which JSON cannot hold) stay text.

import APNs
import JSON

enum ScalarResolution {
    static func resolvePlain(_ text: String) -> JSONValue {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON": return .bool(true)
        case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF": return .bool(false)
        default: break
        }
        guard let first = text.utf8.first,
            first == UInt8(ascii: "-") || first == UInt8(ascii: "+") || first == UInt8(ascii: ".")
                || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9"))
        else { return .string(text) }
        return resolveNumber(text) ?? .string(text)
    }

    private static func resolveNumber(_ text: String) -> JSONValue? {
        var bytes = Array(text.utf8)
        var negative = false
        if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") {
            negative = bytes.first == UInt8(ascii: "-")
            bytes.removeFirst()
        }
        guard !bytes.isEmpty else { return nil }
        // Hexadecimal and 0o-octal integers.
        if bytes.count > 2, bytes[0] == UInt8(ascii: "0"),
            bytes[1] == UInt8(ascii: "x") || bytes[1] == UInt8(ascii: "o")
        {
            let radix = bytes[1] == UInt8(ascii: "x") ? 16 : 8
            let digits = String(decoding: bytes[2...].filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
            guard let magnitude = Int64(digits, radix: radix) else { return nil }
            return .int(negative ? -magnitude : magnitude)
        }
        var sawDigit = false
        var sawDot = false
        var sawExponent = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): sawDigit = true
            case UInt8(ascii: "_"): guard sawDigit, !sawExponent else { return nil }
            case UInt8(ascii: "."):
                guard !sawDot, !sawExponent else { return nil }
                sawDot = true
            case UInt8(ascii: "e"), UInt8(ascii: "E"):
                guard sawDigit, !sawExponent else { return nil }
                sawExponent = true
                if index + 1 < bytes.count,
                    bytes[index + 1] == UInt8(ascii: "-") || bytes[index + 1] == UInt8(ascii: "+")
                {
                    index += 1
                }
                guard index + 1 < bytes.count else { return nil }
            default: return nil
            }
            index += 1
        }
        guard sawDigit else { return nil }
        let cleaned = String(decoding: bytes.filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
        if !sawDot && !sawExponent {
            // `0755` would be octal in YAML 1.1 and decimal in 1.2: too ambiguous to guess.
            if cleaned.count > 1 && cleaned.hasPrefix("0") { return nil }
            if let magnitude = Int64(cleaned) { return .int(negative ? -magnitude : magnitude) }
        }
        guard let magnitude = Double(cleaned), magnitude.isFinite else { return nil }
        return .double(negative ? -magnitude : magnitude)
    }
}
