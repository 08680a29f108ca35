// A broadcast channel's id as APNs hands it out: a base64 string, sent back in `apns-channel-id`.

/// The id of one broadcast channel (iOS 18 Live Activities), as `POST /1/apps/{bundle}/channels`
/// returned it in its `apns-channel-id` header.
///
/// Apple: "The channel ID is a base64-encoded string" (ActivityKit, `PushType.channel(_:)`). Apple gives
/// no length, so none is enforced; the characters are checked because the id goes into an HTTP header.
public struct ChannelID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The id exactly as APNs returned it.
    public let value: String

    /// Checks that `raw` (surrounding white space removed) is base64: A-Z, a-z, 0-9, '+', '/', with
    /// '=' padding only at the end.
    public init(_ raw: String) throws(APNsRequestError) {
        let text = raw.trimmingASCIIWhitespace()
        guard !text.isEmpty else {
            throw APNsRequestError(
                .channelIDInvalid, field: "apns-channel-id",
                "the channel id is empty; use the id `apns-worker channels create` printed, such as c29tZUNoYW5uZWw=")
        }
        var position = 0
        var padding = false
        for byte in text.utf8 {
            position += 1
            let isBase64 =
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2B || byte == 0x2F
            if byte == 0x3D {
                padding = true
            } else if !isBase64 || padding {
                throw APNsRequestError(
                    .channelIDInvalid, field: "apns-channel-id",
                    "character \(position) of channel id '\(text)' is not base64 (A-Z, a-z, 0-9, '+', '/', "
                        + "'=' padding at the end); a channel id is what `channels create` printed")
            }
        }
        value = text
    }

    public var description: String { value }
    public static func < (lhs: ChannelID, rhs: ChannelID) -> Bool { lhs.value < rhs.value }
}

extension String {
    /// Without leading and trailing spaces, tabs and line breaks.
    fileprivate func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(self[first...last])
    }
}
