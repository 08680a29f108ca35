// RFC 3339 timestamps as the rules engine uses them: whole UNIX seconds.

import APNs
import JSON

enum Timestamp {
    /// Whole UNIX seconds (fractions dropped), or nil when `text` is not an RFC 3339 date-time.
    static func unixSeconds(rfc3339 text: String) -> Int64? {
        RFC3339.parse(text).map { Int64($0.rounded(.down)) }
    }

    /// As `unixSeconds(rfc3339:)`, for a string in an event where it lies; nil for anything but a string.
    static func unixSeconds(rfc3339 value: JSONNode) -> Int64? {
        value.withUTF8 { RFC3339.parse(utf8: $0) }?.map { Int64($0.rounded(.down)) }
    }

    /// `2026-11-29T12:00:00Z` for UNIX seconds; used by the command line's output.
    static func rfc3339(unixSeconds: Int64) -> String {
        RFC3339.format(wholeSeconds: unixSeconds)
    }
}
