// How `apns-worker send` prints a request: as one JSON object, or as a curl command that is safe
// to paste into a POSIX shell.

import APNs
import JSON

extension SendCommand {
    /// `{"method":..., "url":..., "headers":{...}, "body":<payload>}` on one line.
    static func dryRunJSON(_ wire: APNsWireRequest) -> String {
        var headers = JSONObject()
        for field in wire.headers { headers.appendUnchecked(field.name, .string(field.value)) }
        let body = (try? JSONValue(parsing: wire.body)) ?? .string(String(decoding: wire.body, as: UTF8.self))
        let object: JSONValue = [
            "method": .string(wire.method), "url": .string(wire.url), "headers": .object(headers), "body": body,
        ]
        return object.compactString
    }

    /// The name of the shell variable the curl command reads the provider token from (as in Apple's docs).
    static let tokenVariable = "AUTHENTICATION_TOKEN"

    /// A curl command sending the same request, one option per line. Every value is single-quoted;
    /// only the authorization header is double-quoted, so the shell fills in $AUTHENTICATION_TOKEN.
    static func curlCommand(_ wire: APNsWireRequest) -> String {
        var lines = ["curl --http2 --request " + shellQuoted(wire.method)]
        lines.append("--header \"authorization: bearer $" + tokenVariable + "\"")
        for field in wire.headers where field.name != "authorization" {
            lines.append("--header " + shellQuoted(field.name + ": " + field.value))
        }
        lines.append("--data-binary " + shellQuoted(String(decoding: wire.body, as: UTF8.self)))
        lines.append(shellQuoted(wire.url))
        return lines.joined(separator: " \\\n  ")
    }

    /// `text` in single quotes, each `'` inside written as `'\''`: the shell takes it literally.
    static func shellQuoted(_ text: String) -> String {
        var quoted = "'"
        for character in text {
            if character == "'" { quoted += "'\\''" } else { quoted.append(character) }
        }
        return quoted + "'"
    }
}
