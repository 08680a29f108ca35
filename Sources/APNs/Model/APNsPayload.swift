// Payload rules APNs enforces or that decide whether a notification does anything: the size limit
// on the bytes actually sent, the `aps` dictionary's keys and their types (Apple's "Generating a
// remote notification", Tables 1 to 3). The per-push-type rules are in APNsPayload+PushTypes.swift.
// Works on JSONValue, no Foundation.

public import JSON

/// Checks notification payloads against APNs' rules.
public enum APNsPayload {
    /// The keys APNs defines inside `aps`. Anything else there is custom data in the wrong place.
    ///
    /// Table 1 of "Generating a remote notification", plus the keys other Apple pages define:
    /// `content-changed` (Updating widgets with WidgetKit push notifications; Updating controls locally
    /// and remotely), `input-push-token` / `input-push-channel` (Starting and updating Live Activities
    /// with ActivityKit push notifications, iOS 18 starts) and `url-args` (Safari Push Notifications,
    /// Notification Programming Guide for Websites).
    public static let apsKeys: Set<String> = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "attributes-type", "attributes",
        "content-changed", "input-push-token", "input-push-channel", "url-args",
    ]

    /// The keys of an `alert` dictionary whose values are strings.
    static let alertStringKeys: Set<String> = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "subtitle-loc-key", "loc-key",
    ]
    /// The keys of an `alert` dictionary whose values are arrays of strings.
    static let alertArrayKeys: Set<String> = ["title-loc-args", "subtitle-loc-args", "loc-args"]

    /// The `interruption-level` values.
    public static let interruptionLevels = ["passive", "active", "time-sensitive", "critical"]
    /// The Live Activity `event` values.
    public static let liveActivityEvents = ["start", "update", "end"]

    /// What the checks here can tell apart in a payload, for a renderer that remembers their answer for a
    /// payload's shape instead of checking each payload (the rules' payload programs). The checks read
    /// only `aps` (and the payload's size). Of a string they ask only whether it is one of these texts
    /// (interruption levels, Live Activity events); of a number its sign, whether it is whole, 0, 1,
    /// from 0 to 1, or from 10^11 on (milliseconds by mistake). Of the values of these `aps` keys they
    /// ask only the type.
    ///
    /// - Important: A check that compares a string with another text, or a number with another bound,
    ///   or that reads inside one of `typeCheckedAPSKeys`, must update these.
    package static let comparedTexts: [String] = interruptionLevels + liveActivityEvents
    package static let typeCheckedAPSKeys: Set<String> = ["content-state", "attributes"]

    /// The class of a leaf value under `aps` as far as the checks can tell (from 0 to 31) (see `comparedTexts`): two
    /// payloads of the same shape whose leaves are pairwise of one class get the same answer. Nil for
    /// an array or object (their members would need classes of their own) or a number the checks might
    /// treat apart from its class (not finite, or whole but beyond Int64), unless `typeOnly` (the value
    /// of a `typeCheckedAPSKeys` key).
    package static func checkedClass(of value: JSONValue, typeOnly: Bool = false) -> UInt8? {
        switch value {
        case .null: return 0
        case .bool(let flag): return flag ? 2 : 1
        case .int(let number): return wholeNumberClass(number)
        case .double(let number):
            guard number.isFinite else { return nil }
            if number.rounded() == number {
                guard let whole = Int64(exactly: number) else { return nil }
                return wholeNumberClass(whole)
            }
            if number < 0 { return 8 }
            if number < 1 { return 9 }
            return number < Double(APNsExpiration.millisecondsThreshold) ? 10 : 11
        case .string(let text):
            guard let index = comparedTexts.firstIndex(of: text) else { return 12 }
            return 16 + UInt8(index)
        case .array: return typeOnly ? 13 : nil
        case .object: return typeOnly ? 14 : nil
        }
    }

    /// `checkedClass(of:)` of a string given as its JSON-escaped UTF-8 (what a renderer wrote between
    /// the quotes): the compared texts need no escaping, so a text is one of them exactly when its
    /// escaped form is.
    package static func checkedClass(ofEscapedText escaped: ArraySlice<UInt8>) -> UInt8 {
        for (index, text) in comparedTextBytes.enumerated() where text.elementsEqual(escaped) {
            return 16 + UInt8(index)
        }
        return 12
    }

    private static let comparedTextBytes: [[UInt8]] = comparedTexts.map { Array($0.utf8) }

    private static func wholeNumberClass(_ number: Int64) -> UInt8 {
        if number < 0 { return 3 }
        if number <= 1 { return 4 + UInt8(number) }
        return number < APNsExpiration.millisecondsThreshold ? 6 : 7
    }

    /// The push types whose payload must carry an `aps` dictionary. The others (voip, complication,
    /// fileprovider, mdm, location, pushtotalk) are handed to the app or the system as they are;
    /// an MDM payload, for one, is `{"mdm": "<push magic>"}` with no `aps` at all.
    public static func requiresAPS(_ pushType: PushType) -> Bool {
        switch pushType {
        case .alert, .background, .liveactivity, .widgets, .controls: return true
        case .voip, .complication, .fileprovider, .mdm, .location, .pushtotalk: return false
        }
    }

    /// Every problem with `payload` for `pushType`.
    ///
    /// - Parameter byteCount: the size of the compact UTF-8 JSON when the caller already has it;
    ///   computed otherwise.
    public static func validate(
        _ payload: JSONValue, pushType: PushType, byteCount: Int? = nil
    ) -> [APNsRequestProblem] {
        var problems: [APNsRequestProblem] = []
        let size = byteCount ?? payload.compactByteCount
        if size > pushType.payloadLimit {
            problems.append(
                APNsRequestProblem(
                    .payloadTooLarge, field: "payload",
                    "the payload is \(size) bytes of compact UTF-8 JSON, \(size - pushType.payloadLimit) over the "
                        + "\(pushType.payloadLimit)-byte limit for \(pushType) pushes; shorten the text or move data "
                        + "the app can fetch itself out of the payload"))
        }
        guard case .object(let root) = payload else {
            problems.append(
                APNsRequestProblem(
                    .payloadNotObject, field: "payload",
                    "the payload is \(payload.typeName); it must be a JSON object with an \"aps\" dictionary, "
                        + #"such as {"aps":{"alert":"Hello"}}"#))
            return problems
        }
        guard let aps = root["aps"] else {
            if requiresAPS(pushType) {
                problems.append(
                    APNsRequestProblem(
                        .payloadMissingAPS, field: "payload.aps",
                        "\(pushType) pushes need an \"aps\" dictionary in the payload, such as "
                            + (pushType == .background
                                ? #"{"aps":{"content-available":1}}"# : #"{"aps":{"alert":"Hello"}}"#)))
            }
            return problems
        }
        guard case .object(let apsObject) = aps else {
            problems.append(
                APNsRequestProblem(
                    .payloadWrongType, field: "payload.aps",
                    "\"aps\" is \(aps.typeName); it must be a dictionary of APNs keys (custom data goes beside it)"))
            return problems
        }
        checkAPSKeys(apsObject, pushType: pushType, problems: &problems)
        switch pushType {
        case .background: checkBackground(apsObject, problems: &problems)
        case .liveactivity: checkLiveActivity(apsObject, problems: &problems)
        case .widgets, .controls: checkContentChanged(apsObject, pushType: pushType, problems: &problems)
        default: break
        }
        return problems
    }

    static func checkAPSKeys(_ aps: JSONObject, pushType: PushType, problems: inout [APNsRequestProblem]) {
        for member in aps {
            // Field names are built only for problems: this loop runs for every request.
            var field: String { "payload.aps." + member.key }
            let value = member.value
            switch member.key {
            case "alert":
                checkAlert(value, liveActivity: pushType == .liveactivity, problems: &problems)
            case "badge":
                if value.intValue == nil {
                    problems.append(wrongType(field, value, "a whole number (0 clears the badge)"))
                } else if let badge = value.intValue, badge < 0 {
                    problems.append(outOfRange(field, "badge is \(badge); use a whole number from 0 (0 clears it)"))
                }
            case "sound":
                checkSound(value, problems: &problems)
            case "thread-id", "category", "target-content-id", "filter-criteria", "attributes-type":
                if value.stringValue == nil { problems.append(wrongType(field, value, "a string")) }
            case "content-available", "mutable-content":
                if value.intValue == nil {
                    problems.append(wrongType(field, value, "the number 1"))
                } else if value.intValue != 1 {
                    problems.append(
                        outOfRange(
                            field,
                            "\(member.key) is \(value.compactString); the only value APNs defines is 1, "
                                + "leave the key out otherwise"))
                }
            case "interruption-level":
                if let level = value.stringValue {
                    if !interruptionLevels.contains(level) {
                        problems.append(
                            outOfRange(
                                field,
                                "'\(level)' is not an interruption level; use one of "
                                    + interruptionLevels.joined(separator: ", ")))
                    }
                } else {
                    problems.append(wrongType(field, value, "a string: " + interruptionLevels.joined(separator: ", ")))
                }
            case "relevance-score":
                // "a number between 0 and 1 ... If your remote notification updates a Live Activity, you
                // can set any Double value" (Generating a remote notification, Table 1).
                if pushType == .liveactivity {
                    if value.doubleValue == nil {
                        problems.append(wrongType(field, value, "a number (Live Activities compare them: 25, 50, 100)"))
                    }
                } else {
                    checkUnitInterval(value, field: field, name: "relevance-score", problems: &problems)
                }
            case "url-args":
                // Safari: the strings that fill the placeholders of the website's urlFormatString.
                let isStrings = value.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false
                if !isStrings {
                    problems.append(wrongType(field, value, #"an array of strings, such as ["boarding"]"#))
                }
            case "timestamp", "stale-date", "dismissal-date":
                checkSeconds(value, field: field, name: member.key, problems: &problems)
            case "event":
                if let event = value.stringValue {
                    if !liveActivityEvents.contains(event) {
                        problems.append(
                            outOfRange(
                                field, "'\(event)' is not a Live Activity event; use start, update or end"))
                    }
                } else {
                    problems.append(wrongType(field, value, "a string: start, update or end"))
                }
            case "content-state", "attributes":
                if value.objectValue == nil { problems.append(wrongType(field, value, "a dictionary")) }
            case "content-changed":
                if value.boolValue == nil { problems.append(wrongType(field, value, "true")) }
            case "input-push-token":
                if value.intValue != 1 { problems.append(wrongType(field, value, "the number 1")) }
            case "input-push-channel":
                if value.stringValue == nil { problems.append(wrongType(field, value, "a channel id string")) }
            default:
                problems.append(
                    APNsRequestProblem(
                        .payloadUnknownAPSKey, field: field,
                        "\"\(member.key)\" is not an APNs key, and APNs keeps \"aps\" for its own; put custom data "
                            + "beside \"aps\" at the top level of the payload"))
            }
        }
    }

    /// Table 2 of "Generating a remote notification": string and array-of-strings keys. A Live Activity's
    /// alert may also give `title` and `body` as `{"loc-key": ..., "loc-args": [...]}` and carry a
    /// `sound`, as Apple's own example does (Starting and updating Live Activities with ActivityKit push
    /// notifications). Other keys are left alone: Apple does not forbid them.
    static func checkAlert(_ value: JSONValue, liveActivity: Bool, problems: inout [APNsRequestProblem]) {
        switch value {
        case .string:
            return
        case .object(let alert):
            for member in alert {
                var field: String { "payload.aps.alert." + member.key }
                if alertStringKeys.contains(member.key), member.value.stringValue == nil {
                    if liveActivity, member.key == "title" || member.key == "body" || member.key == "subtitle",
                        case .object(let localized) = member.value
                    {
                        checkLocalizedText(localized, field: field, problems: &problems)
                    } else {
                        problems.append(
                            wrongType(
                                field, member.value,
                                liveActivity ? #"a string, or {"loc-key": "...", "loc-args": [...]}"# : "a string"))
                    }
                } else if alertArrayKeys.contains(member.key) {
                    let isStrings = member.value.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false
                    if !isStrings { problems.append(wrongType(field, member.value, "an array of strings")) }
                } else if liveActivity, member.key == "sound" {
                    checkSound(member.value, field: field, problems: &problems)
                }
            }
        default:
            problems.append(wrongType("payload.aps.alert", value, "a string or a dictionary with title, body, ..."))
        }
    }

    /// A Live Activity alert text given as a localization key and its arguments.
    static func checkLocalizedText(_ text: JSONObject, field: String, problems: inout [APNsRequestProblem]) {
        guard let key = text["loc-key"] else {
            problems.append(
                APNsRequestProblem(
                    .payloadMissingKey, field: field + ".loc-key",
                    "a localized alert text needs \"loc-key\", the key in the app's Localizable.strings"))
            return
        }
        if key.stringValue == nil { problems.append(wrongType(field + ".loc-key", key, "a string")) }
        if let arguments = text["loc-args"], !(arguments.arrayValue?.allSatisfy({ $0.stringValue != nil }) ?? false) {
            problems.append(wrongType(field + ".loc-args", arguments, "an array of strings"))
        }
    }

    static func checkSound(
        _ value: JSONValue, field soundField: String = "payload.aps.sound", problems: inout [APNsRequestProblem]
    ) {
        switch value {
        case .string:
            return
        case .object(let sound):
            for member in sound {
                var field: String { soundField + "." + member.key }
                switch member.key {
                case "critical":
                    if let flag = member.value.intValue {
                        if flag != 0 && flag != 1 {
                            problems.append(outOfRange(field, "critical is \(flag); use 1 for a critical alert or 0"))
                        }
                    } else {
                        problems.append(wrongType(field, member.value, "0 or 1"))
                    }
                case "name":
                    if member.value.stringValue == nil { problems.append(wrongType(field, member.value, "a string")) }
                case "volume":
                    checkUnitInterval(member.value, field: field, name: "volume", problems: &problems)
                default:
                    problems.append(
                        APNsRequestProblem(
                            .payloadUnknownAPSKey, field: field,
                            "\"\(member.key)\" is not a sound key; a sound dictionary has critical, name and volume"))
                }
            }
            if sound["name"] == nil {
                problems.append(
                    APNsRequestProblem(
                        .payloadMissingKey, field: soundField + ".name",
                        "a sound dictionary needs \"name\", the sound file or \"default\""))
            }
        default:
            problems.append(
                wrongType(
                    soundField, value, #"a sound name string, or {"critical":1,"name":"default","volume":1}"#))
        }
    }

    static func checkUnitInterval(
        _ value: JSONValue, field: @autoclosure () -> String, name: String, problems: inout [APNsRequestProblem]
    ) {
        guard let number = value.doubleValue else {
            problems.append(wrongType(field(), value, "a number from 0 to 1"))
            return
        }
        if !(number >= 0 && number <= 1) {
            problems.append(outOfRange(field(), "\(name) is \(value.compactString); use a number from 0 to 1"))
        }
    }

    /// Apple types `timestamp`, `stale-date` and `dismissal-date` as a Number holding a UNIX timestamp
    /// (Generating a remote notification, Table 1): seconds since 1970, fractions allowed. A past date is
    /// fine (a past `dismissal-date` removes an ended activity at once); a value from 10^11 on is
    /// milliseconds by mistake.
    static func checkSeconds(
        _ value: JSONValue, field: @autoclosure () -> String, name: String, problems: inout [APNsRequestProblem]
    ) {
        guard let seconds = value.doubleValue else {
            problems.append(wrongType(field(), value, "a number of UNIX seconds"))
            return
        }
        if seconds < 0 {
            problems.append(outOfRange(field(), "\(name) is \(value.compactString); use a time in UNIX seconds"))
        } else if seconds >= Double(APNsExpiration.millisecondsThreshold) {
            let whole = value.intValue ?? Int64(seconds)
            problems.append(
                outOfRange(
                    field(),
                    "\(name) \(value.compactString) looks like milliseconds; APNs wants UNIX seconds (\(whole / 1000))")
            )
        }
    }

    static func wrongType(_ field: String, _ value: JSONValue, _ expected: String) -> APNsRequestProblem {
        let name = field.split(separator: ".").last.map(String.init) ?? field
        return APNsRequestProblem(.payloadWrongType, field: field, "\(name) is \(value.typeName); use \(expected)")
    }

    static func outOfRange(_ field: String, _ message: String) -> APNsRequestProblem {
        APNsRequestProblem(.payloadValueOutOfRange, field: field, message)
    }
}
