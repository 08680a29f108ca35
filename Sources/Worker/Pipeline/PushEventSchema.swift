// schemas/push-request.schema.json as code: every constraint it states, checked before the event is decoded,
// so that a record the schema refuses is a dead letter naming the JSON path of the first violation.

import APNs
import JSON

/// The input schema's checks. A record is a valid event exactly when the schema accepts it (and names no
/// member twice, which a schema cannot say); anything else goes to the dead-letter topic.
enum PushEventSchema {
    static let maximumIDLength = 256
    static let maximumTypeLength = 200
    static let maximumBundleIDLength = 155
    static let maximumUserIDLength = 256
    static let maximumCollapseIDLength = 64
    /// The members `apns` may hold (the schema's `additionalProperties: false`).
    static let overrideNames = [
        "priority", "expiration", "collapse_id", "thread_id", "badge", "sound", "category", "interruption_level",
        "relevance_score",
    ]

    /// The event's members, when the event is one by the schema; otherwise its first violation, as "what is
    /// wrong at $.path; what would be right".
    ///
    /// Members are read where they lie in the event's tape, texts as their bytes: every event passes here.
    static func checked(_ event: JSONNode) -> Result<EventMembers, EventDecodingError> {
        guard event.isObject else {
            return .failure(PushEventDecoder.violation("the event must be a JSON object at $, found \(event.typeName)"))
        }
        var members = EventMembers(of: event)
        if let problem = violation(in: &members) { return .failure(PushEventDecoder.violation(problem)) }
        return .success(members)
    }

    /// The first violation of the schema in an object's members; `occurredAtSeconds` is set when the
    /// timestamp is valid (it is parsed once, here).
    static func violation(in members: inout EventMembers) -> String? {
        if let problem = requiredString(members.id, "id", path: "$", maximumLength: maximumIDLength) {
            return problem
        }
        if let problem = requiredString(members.type, "type", path: "$", maximumLength: maximumTypeLength) {
            return problem
        }
        if let occurredAt = members.occurredAt {
            guard let seconds = timestamp(occurredAt) else {
                return "occurred_at at $.occurred_at must be an RFC 3339 timestamp like 2026-11-29T12:00:00Z, "
                    + "found \(describe(occurredAt))"
            }
            members.occurredAtSeconds = seconds
        }
        guard let app = members.app else {
            return "app is missing at $; an event names the bundle id of the app to notify (com.example.chat)"
        }
        if let problem = bundleID(app, path: "$.app") { return problem }
        if let recipient = members.recipient, let problem = Self.recipient(recipient) { return problem }
        guard members.devices != nil || members.channels != nil else {
            return "devices is missing at $; an event lists at least one device ({\"token\": ..., \"environment\": "
                + "...}) or broadcast channel (channels: [{\"id\": ..., \"environment\": ...}])"
        }
        if let devices = members.devices, let problem = deviceList(devices) { return problem }
        if let channels = members.channels, let problem = channelList(channels) { return problem }
        if let data = members.data, !data.isObject {
            return "data at $.data must be an object, found \(data.typeName)"
        }
        if let apns = members.apns, let problem = overrides(apns) { return problem }
        return nil
    }

    // MARK: - Members

    static func recipient(_ recipient: JSONNode) -> String? {
        guard recipient.isObject else {
            return "recipient at $.recipient must be an object, found \(recipient.typeName)"
        }
        if let userID = recipient["user_id"],
            userID.withUTF8({ !$0.isEmpty && fits($0, maximumUserIDLength) }) != true
        {
            return "recipient.user_id at $.recipient.user_id must be a string of 1 to \(maximumUserIDLength) "
                + "characters, found \(describe(userID))"
        }
        if let locale = recipient["locale"], locale.withUTF8(isLanguageTag) != true {
            return "recipient.locale at $.recipient.locale must be a BCP 47 language tag like fr-CA, "
                + "found \(describe(locale))"
        }
        return nil
    }

    static func deviceList(_ value: JSONNode) -> String? {
        targetList(
            value, list: "devices", item: "device", key: "token", maximum: PushEventDecoder.maximumDevices,
            emptyAdvice: "an event needs at least one device", isValid: isDeviceToken,
            expected: "an even number of 64 to 200 hexadecimal digits (an APNs device token)")
    }

    static func channelList(_ value: JSONNode) -> String? {
        targetList(
            value, list: "channels", item: "channel", key: "id", maximum: PushEventDecoder.maximumChannels,
            emptyAdvice: "leave it out or name a channel", isValid: isChannelID,
            expected: "a channel id as `apns-worker channels create` printed it (base64)")
    }

    /// `devices` or `channels`: 1 to `maximum` objects, each naming its target under `key` and an environment.
    static func targetList(
        _ value: JSONNode, list: String, item: String, key: String, maximum: Int, emptyAdvice: String,
        isValid: (UnsafeBufferPointer<UInt8>) -> Bool, expected: String
    ) -> String? {
        guard value.isArray else { return "\(list) at $.\(list) must be an array, found \(value.typeName)" }
        guard value.count > 0 else { return "\(list) at $.\(list) is empty; \(emptyAdvice)" }
        guard value.count <= maximum else {
            return "\(list) at $.\(list) has \(value.count) entries; at most \(maximum) per event (split the event)"
        }
        for (index, entry) in value.elements.enumerated() {
            // The path is spelled only for a message.
            func path() -> String { "$.\(list)[\(index)]" }
            guard entry.isObject else { return "a \(item) at \(path()) must be an object, found \(entry.typeName)" }
            guard let target = entry[key] else { return "\(key) is missing at \(path())" }
            if target.withUTF8(isValid) != true {
                return "\(key) at \(path()).\(key) must be \(expected), found \(describe(target))"
            }
            guard let environment = entry["environment"] else {
                return "environment is missing at \(path()); production, sandbox or development"
            }
            if environment.withUTF8(isEnvironmentName) != true {
                return "environment at \(path()).environment must be production, sandbox or development, "
                    + "found \(describe(environment))"
            }
        }
        return nil
    }

    /// The schema's channel id pattern, `^[A-Za-z0-9+/]+=*$`.
    static func isChannelID(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let firstPadding = bytes.firstIndex(of: UInt8(ascii: "=")) ?? Optional(bytes.count), firstPadding > 0
        else { return false }
        let isBase64Character = { (byte: UInt8) in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
        return bytes[..<firstPadding].allSatisfy(isBase64Character)
            && bytes[firstPadding...].allSatisfy { $0 == UInt8(ascii: "=") }
    }

    /// The `apns` object: only the members the schema lists, each of its type and range.
    static func overrides(_ apns: JSONNode) -> String? {
        guard apns.isObject else { return "apns at $.apns must be an object, found \(apns.typeName)" }
        var problem: String?
        apns.forEachMember { name, value in
            problem = override(name.stringValue ?? "", value)
            return problem == nil
        }
        return problem
    }

    /// The problem with one member of `apns`, if it has one.
    private static func override(_ name: String, _ value: JSONNode) -> String? {
        func path() -> String { "$.apns" + JSONPathStep.member(name) }
        let fine: Bool
        let expected: String
        switch name {
        case "priority":
            fine = value.intValue.map { [1, 5, 10].contains($0) } ?? false
            expected = "1, 5 or 10"
        case "expiration":
            fine = value.intValue.map { (0...99_999_999_999).contains($0) } ?? false
            expected = "an integer of unix seconds, 0 to 99999999999"
        case "collapse_id":
            let length = value.stringValue?.unicodeScalars.count ?? 0
            fine = (1...maximumCollapseIDLength).contains(length)
            expected = "a string of 1 to \(maximumCollapseIDLength) characters"
        case "thread_id", "sound", "category":
            fine = !(value.stringValue ?? "").isEmpty
            expected = "a non-empty string"
        case "badge":
            fine = value.intValue.map { $0 >= 0 } ?? false
            expected = "an integer, 0 or more"
        case "interruption_level":
            fine =
                value.stringValue.map { ["passive", "active", "time-sensitive", "critical"].contains($0) }
                ?? false
            expected = "passive, active, time-sensitive or critical"
        case "relevance_score":
            // Any number: 0 to 1 for notifications, unbounded for Live Activities; the rule's push type
            // decides, when the request is built.
            fine = value.doubleValue != nil
            expected = "a number"
        default:
            var suggestion = ""
            if let close = Spelling.closest(to: name, among: overrideNames) {
                suggestion = " (did you mean \(close)?)"
            }
            return "unknown key \(quoted(name)) at \(path())\(suggestion); apns may hold only "
                + overrideNames.joined(separator: ", ")
        }
        if !fine { return "apns.\(name) at \(path()) must be \(expected), found \(describe(value))" }
        return nil
    }

    // MARK: - Values

    static func requiredString(_ value: JSONNode?, _ key: String, path: String, maximumLength: Int) -> String? {
        guard let value else { return "\(key) is missing at \(path)" }
        if value.withUTF8({ !$0.isEmpty && fits($0, maximumLength) }) == true { return nil }
        return "\(key) at \(path).\(key) must be a string of 1 to \(maximumLength) characters, found \(describe(value))"
    }

    /// At most `maximumLength` characters (Unicode scalars, as JSON Schema's maxLength counts them). A text
    /// of no more UTF-8 bytes than that fits without counting them (decoding the scalars of every event's
    /// id and type was most of what checking them cost).
    static func fits(_ text: UnsafeBufferPointer<UInt8>, _ maximumLength: Int) -> Bool {
        // Every scalar has one byte that is not a continuation byte (10xxxxxx).
        text.count <= maximumLength || text.lazy.filter { $0 & 0xC0 != 0x80 }.count <= maximumLength
    }

    /// The seconds since 1970 of a timestamp the schema's pattern allows; nil for anything else.
    static func timestamp(_ value: JSONNode) -> Double? {
        value.withUTF8 { isTimestampShape($0) ? RFC3339.parse(utf8: $0) : nil } ?? nil
    }

    static func bundleID(_ value: JSONNode, path: String) -> String? {
        guard value.withUTF8({ $0.count <= maximumBundleIDLength && isBundleID($0) }) == true else {
            return "app at \(path) must be a bundle id like com.example.chat (letters, digits and '-' in two "
                + "or more parts joined by '.', at most \(maximumBundleIDLength) characters), found \(describe(value))"
        }
        return nil
    }

    /// `production`, `sandbox` or `development`, without an array literal per device.
    static func isEnvironmentName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        ASCIIBytes.equal(name, "production") || ASCIIBytes.equal(name, "sandbox")
            || ASCIIBytes.equal(name, "development")
    }

    /// `^([0-9a-fA-F]{2}){32,100}$`
    static func isDeviceToken(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = text.count
        guard count % 2 == 0, (64...200).contains(count) else { return false }
        // Every byte's digit value OR-ed together, tested once at the end: a hex digit's is 0-15 and any other
        // byte's 0xFF (`ASCIIBytes.hexValue`, branch-free), so the loop has no branch per byte. Every device
        // of every event passes here; a test per byte was 0.6% of the event loops' CPU.
        var values: UInt8 = 0
        for byte in text { values |= ASCIIBytes.hexValue(byte) }
        return values & 0xF0 == 0
    }

    /// `^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`, in one pass over the bytes (every event has an app).
    static func isBundleID(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        var dots = 0
        var partLength = 0
        for byte in text {
            if byte == UInt8(ascii: ".") {
                guard partLength > 0 else { return false }
                dots += 1
                partLength = 0
            } else if isAlphanumeric(byte) || byte == UInt8(ascii: "-") {
                partLength += 1
            } else {
                return false
            }
        }
        return dots >= 1 && partLength > 0
    }

    /// `^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`, in one pass over the bytes.
    static func isLanguageTag(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        var isFirst = true
        var length = 0
        func partFits() -> Bool { isFirst ? (2...3).contains(length) : (2...8).contains(length) }
        for byte in text {
            if byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") {
                guard partFits() else { return false }
                isFirst = false
                length = 0
            } else if isAlphanumeric(byte) && !(isFirst && isDigit(byte)) {
                length += 1
            } else {
                return false
            }
        }
        return partFits()
    }

    /// The schema's timestamp pattern: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
    static func isTimestampShape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func digits(_ range: Range<Int>) -> Bool {
            range.allSatisfy { bytes.indices.contains($0) && isDigit(bytes[$0]) }
        }
        guard bytes.count >= 20, digits(0..<4), bytes[4] == UInt8(ascii: "-"), digits(5..<7),
            bytes[7] == UInt8(ascii: "-"), digits(8..<10), bytes[10] == UInt8(ascii: "T"), digits(11..<13),
            bytes[13] == UInt8(ascii: ":"), digits(14..<16), bytes[16] == UInt8(ascii: ":"), digits(17..<19)
        else { return false }
        var index = 19
        if bytes[index] == UInt8(ascii: ".") {
            let start = index + 1
            index = start
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            guard (1...9).contains(index - start) else { return false }
        }
        guard index < bytes.count else { return false }
        if bytes[index] == UInt8(ascii: "Z") { return index + 1 == bytes.count }
        guard bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"), bytes.count == index + 6
        else { return false }
        return digits(index + 1..<index + 3) && bytes[index + 3] == UInt8(ascii: ":")
            && digits(index + 4..<index + 6)
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// A value as an error message quotes it: short, and never the whole of a hostile string.
    static func describe(_ value: JSONNode) -> String {
        if let text = value.stringValue { return quoted(text) }
        return value.typeName
    }

    static func quoted(_ text: String) -> String {
        let shown = text.unicodeScalars.count > 80 ? String(text.prefix(80)) + "…" : text
        return "'\(shown)'"
    }
}
