// Keeps secrets out of logs (and out of readiness reasons): fields named like secrets are replaced whole,
// and anything in free text that looks like a JWT or a PEM block is cut out; words about keys ("PEM",
// a quoted BEGIN line in an error message) are not key material and stay.

import APNs
public import JSON

/// Redaction of secrets from log fields and text.
///
/// Field names are split into words (`provider_token`, `apiKey`, `x-authorization`); a name is sensitive
/// when one word is a secret word (password, secret, token, key, authorization, ...) unless its last word
/// says the value is only about the secret (`key_id`, `password_file`, `token_age_seconds`).
/// Values anywhere are scanned for JWTs (`eyJ...`.`...`.`...`) and PEM blocks (`-----BEGIN ...`).
public enum LogRedaction {
    /// What a sensitive field's value becomes.
    public static let placeholder = "[redacted]"
    static let jwtPlaceholder = "[redacted jwt]"
    static let pemPlaceholder = "[redacted pem]"

    private static let secretWords: Set<String> = [
        "password", "passwd", "passphrase", "secret", "token", "key", "authorization", "cookie", "jwt", "bearer",
        "signature", "credential", "credentials",
    ]
    /// A last word that makes a secret word harmless: the value names, locates or measures the secret.
    private static let harmlessLastWords: Set<String> = [
        "id", "ids", "file", "files", "path", "name", "type", "kind", "count", "age", "seconds", "ms", "at",
        "expiry", "expires", "length", "size", "bytes", "status", "reason", "present", "source",
    ]

    /// Whether a field of this name holds a secret.
    public static func isSensitiveFieldName(_ name: String) -> Bool {
        let words = splitWords(name)
        guard let last = words.last, words.contains(where: secretWords.contains) else { return false }
        return !harmlessLastWords.contains(last)
    }

    /// `value` with sensitive fields replaced (recursively) and JWTs/PEM blocks cut out of every string.
    public static func redact(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text):
            return .string(scrub(text))
        case .array(let elements):
            return .array(elements.map(redact))
        case .object(let object):
            return .object(redact(object))
        default:
            return value
        }
    }

    /// `object` with sensitive fields replaced and JWTs/PEM blocks cut out of the rest.
    public static func redact(_ object: JSONObject) -> JSONObject {
        var result = JSONObject()
        for member in object {
            let value =
                isSensitiveFieldName(member.key) && !member.value.isNull
                ? .string(placeholder)
                : redact(member.value)
            result.appendUnchecked(member.key, value)
        }
        return result
    }

    /// `text` with every JWT-looking run and every PEM block replaced by a placeholder.
    public static func scrub(_ text: String) -> String {
        var text = text
        guard text.withUTF8(mightContainSecret) else { return text }
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if let end = pemBlockEnd(bytes, from: index) {
                output.append(contentsOf: pemPlaceholder.utf8)
                index = end
            } else if let end = jwtEnd(bytes, from: index) {
                output.append(contentsOf: jwtPlaceholder.utf8)
                index = end
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static let pemBegin = Array("-----BEGIN ".utf8)
    private static let pemEnd = Array("-----END ".utf8)
    private static let dashes = Array("-----".utf8)
    private static let jwtStart = Array("eyJ".utf8)

    private static func mightContainSecret(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while index + 3 <= bytes.count {
            if bytes[index] == UInt8(ascii: "e") && bytes[index + 1] == UInt8(ascii: "y")
                && bytes[index + 2] == UInt8(ascii: "J")
            {
                return true
            }
            if bytes[index] == UInt8(ascii: "-") && index + pemBegin.count <= bytes.count
                && pemBegin.indices.allSatisfy({ bytes[index + $0] == pemBegin[$0] })
            {
                return true
            }
            index += 1
        }
        return false
    }

    private static func hasPrefix(_ bytes: [UInt8], _ prefix: [UInt8], at index: Int) -> Bool {
        guard index + prefix.count <= bytes.count else { return false }
        for offset in 0..<prefix.count where bytes[index + offset] != prefix[offset] { return false }
        return true
    }

    /// The end of a PEM block starting at `index`: after its `-----END ...-----` line, or the end of the
    /// text when it was cut off (a truncated key is still a key).
    ///
    /// A block is a `-----BEGIN LABEL-----` line with something after it: a line break (also an escaped
    /// `\n`) or base64 text. A BEGIN line quoted in prose (`expected a '-----BEGIN PRIVATE KEY-----' line`)
    /// carries no key material and is left alone, so that error messages stay whole.
    private static func pemBlockEnd(_ bytes: [UInt8], from index: Int) -> Int? {
        guard hasPrefix(bytes, pemBegin, at: index) else { return nil }
        var cursor = index + pemBegin.count
        while cursor < bytes.count && isPEMLabelByte(bytes[cursor]) { cursor += 1 }
        guard hasPrefix(bytes, dashes, at: cursor) else { return nil }
        cursor += dashes.count
        guard startsPEMBody(bytes, at: cursor) else { return nil }
        while cursor < bytes.count {
            if hasPrefix(bytes, pemEnd, at: cursor) {
                cursor += pemEnd.count
                while cursor < bytes.count {
                    if hasPrefix(bytes, dashes, at: cursor) { return cursor + dashes.count }
                    if bytes[cursor] == UInt8(ascii: "\n") { return cursor }
                    cursor += 1
                }
                return bytes.count
            }
            cursor += 1
        }
        return bytes.count
    }

    /// Whether what follows a BEGIN line is a PEM body: after spaces, a line break (or an escaped one), or
    /// a run of base64 longer than any word of prose.
    private static func startsPEMBody(_ bytes: [UInt8], at start: Int) -> Bool {
        var cursor = start
        while cursor < bytes.count && (bytes[cursor] == UInt8(ascii: " ") || bytes[cursor] == UInt8(ascii: "\t")) {
            cursor += 1
        }
        guard cursor < bytes.count else { return false }
        let byte = bytes[cursor]
        if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { return true }
        if byte == UInt8(ascii: "\\") && cursor + 1 < bytes.count
            && (bytes[cursor + 1] == UInt8(ascii: "n") || bytes[cursor + 1] == UInt8(ascii: "r"))
        {
            return true
        }
        var run = 0
        while cursor + run < bytes.count && isBase64(bytes[cursor + run]) { run += 1 }
        return run >= 16
    }

    private static func isPEMLabelByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: " ")
    }

    private static func isBase64(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
    }

    /// The end of a JWT (three base64url segments, the first starting `eyJ`) at `index`, if there is one.
    private static func jwtEnd(_ bytes: [UInt8], from index: Int) -> Int? {
        guard hasPrefix(bytes, jwtStart, at: index) else { return nil }
        if index > 0 && isBase64URL(bytes[index - 1]) { return nil }
        var cursor = index
        for segment in 0..<3 {
            let start = cursor
            while cursor < bytes.count && isBase64URL(bytes[cursor]) { cursor += 1 }
            // Header and claims are at least a few characters; the signature may be absent ("alg":"none").
            if segment < 2 && cursor - start < 4 { return nil }
            if segment < 2 {
                guard cursor < bytes.count && bytes[cursor] == UInt8(ascii: ".") else { return nil }
                cursor += 1
            }
        }
        return cursor
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: "_")
    }

    /// `provider_token` → [provider, token]; `apiKey` → [api, key]; `X-Authorization` → [x, authorization].
    /// Works on UTF-8 bytes (ASCII case rules): it runs for every field of every log line.
    static func splitWords(_ name: String) -> [String] {
        var words: [String] = []
        var name = name
        name.withUTF8 { bytes in
            var start = 0
            var previousWasLower = false
            func endWord(at end: Int) {
                if end > start {
                    words.append(
                        String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
                            .lowercased())
                }
            }
            for index in 0..<bytes.count {
                let byte = bytes[index]
                let isUpper = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")
                let isWordByte =
                    isUpper || byte >= 0x80 || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                if !isWordByte {
                    endWord(at: index)
                    start = index + 1
                    previousWasLower = false
                    continue
                }
                if isUpper && previousWasLower {
                    endWord(at: index)
                    start = index
                }
                previousWasLower = !isUpper
            }
            endWord(at: bytes.count)
        }
        return words
    }
}
