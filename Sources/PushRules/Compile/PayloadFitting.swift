// Fitting a payload under APNs' size limit by shortening the text field a rule names, on a character
// (grapheme cluster) boundary with an ellipsis, so the result is always valid UTF-8 and never splits
// an emoji or an accented letter. The arithmetic counts bytes as the JSON writer escapes them.

import APNs
import JSON

enum PayloadFitting {
    static let ellipsis = "…"
    static let ellipsisByteCount = 3

    struct Fitted {
        var payload: JSONValue
        var byteCount: Int
        var notes: [String]
    }

    /// Shortens the fields at `paths`, in order, until the payload's compact encoding is at most `limit`
    /// bytes. Returns nil, with the final size in `finalByteCount`, when it still does not fit.
    static func fit(_ payload: JSONValue, limit: Int, paths: [ShortenPath], finalByteCount: inout Int) -> Fitted? {
        var payload = payload
        var size = payload.compactByteCount
        var notes: [String] = []
        if size <= limit { return Fitted(payload: payload, byteCount: size, notes: notes) }
        for path in paths {
            guard case .string(let text)? = payload.value(atPath: path.wire.map { Substring($0) }), !text.isEmpty
            else { continue }
            let overflow = size - limit
            let budget = escapedByteCount(text) - overflow - ellipsisByteCount
            let shortened = prefix(of: text, escapedByteBudget: max(0, budget)) + ellipsis
            // A text already shorter than an ellipsis gains nothing.
            if escapedByteCount(shortened) >= escapedByteCount(text) { continue }
            payload = replacing(in: payload, at: path.wire[...], with: .string(shortened))
            size = payload.compactByteCount
            notes.append(
                "\(path.name) shortened from \(text.utf8.count) to \(shortened.utf8.count) bytes to fit the "
                    + "\(limit)-byte payload limit")
            if size <= limit { return Fitted(payload: payload, byteCount: size, notes: notes) }
        }
        finalByteCount = size
        return nil
    }

    /// The bytes `text` takes inside a JSON string as `JSONWriter` writes it.
    static func escapedByteCount(_ text: String) -> Int {
        var count = 0
        for byte in text.utf8 { count += escapedByteCount(byte) }
        return count
    }

    @inline(__always) static func escapedByteCount(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09, 0x08, 0x0C: return 2
        case 0..<0x20: return 6
        default: return 1
        }
    }

    /// The longest prefix of whole characters whose escaped size is at most `budget`, without
    /// trailing white space (so the ellipsis follows a word).
    static func prefix(of text: String, escapedByteBudget budget: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            var cost = 0
            for byte in text[index].utf8 { cost += escapedByteCount(byte) }
            if used + cost > budget { break }
            used += cost
            end = text.index(after: index)
        }
        var kept = text[..<end]
        while let last = kept.last, last.isWhitespace { kept = kept.dropLast() }
        return String(kept)
    }

    static func replacing(in value: JSONValue, at path: ArraySlice<String>, with replacement: JSONValue) -> JSONValue {
        guard let key = path.first else { return replacement }
        guard case .object(var object) = value, let child = object[key] else { return value }
        object[key] = replacing(in: child, at: path.dropFirst(), with: replacement)
        return .object(object)
    }
}

/// A field a rule may shorten: its name in the rules file and its path in the payload.
struct ShortenPath: Sendable {
    /// As the rules file names it, e.g. `alert.body`.
    let name: String
    /// Keys from the payload's root, e.g. `["aps", "alert", "body"]`.
    let wire: [String]
}
