// Compiling the `aps` dictionary a rule sets: alert, sound and Live Activity fields, each checked
// against what Apple accepts for it, into value templates in the order APNs documents them.

import APNs
import JSON

extension RulesFileDecoder {
    mutating func decodeAPSFields(_ fields: [String: FieldSource]) -> [ValueTemplate.Member] {
        var aps: [ValueTemplate.Member] = []
        func append(_ key: String, _ value: ValueTemplate?) {
            if let value { aps.append(.init(key: key, value: value)) }
        }
        for name in PushField.apsNames {
            guard let field = fields[name] else { continue }
            let node = field.node
            switch name {
            case "alert": append("alert", decodeAlert(node))
            case "badge": append("badge", typedField(node, field: "badge", type: .integer(minimum: 0)))
            case "sound": append("sound", decodeSound(node))
            case "thread_id", "category", "target_content_id", "filter_criteria":
                append(name.replacingUnderscores(), typedField(node, field: name, type: .text))
            case "content_available", "mutable_content":
                if flag(node, field: name) == true { append(name.replacingUnderscores(), .constant(.int(1))) }
            case "interruption_level":
                append(
                    "interruption-level",
                    typedField(
                        node, field: name, type: .choice(APNsPayload.interruptionLevels)))
            case "relevance_score":
                // 0 to 1, but "any Double value" for a Live Activity (Generating a remote notification).
                let liveActivity = fields["push_type"]?.node.scalarValue?.stringValue == PushType.liveactivity.rawValue
                append(
                    "relevance-score", typedField(node, field: name, type: liveActivity ? .number : .unitInterval))
            case "live_activity":
                aps += decodeLiveActivity(node)
                // "Include an alert in the JSON payload" of a start (Starting and updating Live Activities
                // with ActivityKit push notifications).
                if node.entry("event")?.value.scalarValue?.stringValue == "start", fields["alert"] == nil {
                    report(node.position, "a Live Activity start needs an alert, so the person sees what started")
                }
            default: break
            }
        }
        return aps
    }

    mutating func decodeAlert(_ node: SourceNode) -> ValueTemplate? {
        guard let entries = node.entries else { return typedField(node, field: "alert", type: .text) }
        checkKeys(entries, allowed: PushField.alertTextKeys + PushField.alertListKeys, in: "alert")
        var members: [ValueTemplate.Member] = []
        for entry in entries {
            let field = "alert." + entry.key
            if PushField.alertTextKeys.contains(entry.key) {
                if let value = typedField(entry.value, field: field, type: .text) {
                    members.append(.init(key: entry.key.replacingUnderscores(), value: value))
                }
            } else if PushField.alertListKeys.contains(entry.key) {
                guard let elements = entry.value.elements else {
                    report(
                        entry.value.position,
                        "\(field) must be a list of texts, e.g. [\"{{ event.data.sender.name }}\"]")
                    continue
                }
                let values = elements.enumerated().compactMap { index, element in
                    typedField(element, field: "\(field)[\(index)]", type: .text)
                }
                members.append(.init(key: entry.key.replacingUnderscores(), value: .array(values)))
            }
        }
        return .object(members)
    }

    mutating func decodeSound(_ node: SourceNode) -> ValueTemplate? {
        guard let entries = node.entries else { return typedField(node, field: "sound", type: .text) }
        checkKeys(entries, allowed: ["critical", "name", "volume"], in: "sound")
        var members: [ValueTemplate.Member] = []
        if let critical = node.entry("critical"), flag(critical.value, field: "sound.critical") == true {
            members.append(.init(key: "critical", value: .constant(.int(1))))
        }
        if let name = node.entry("name") {
            if let value = typedField(name.value, field: "sound.name", type: .text) {
                members.append(.init(key: "name", value: value))
            }
        } else {
            report(node.position, "a sound mapping needs name (a sound file, or default)")
        }
        if let volume = node.entry("volume"),
            let value = typedField(
                volume.value, field: "sound.volume",
                type: .unitInterval)
        {
            members.append(.init(key: "volume", value: value))
        }
        return .object(members)
    }

    mutating func decodeLiveActivity(_ node: SourceNode) -> [ValueTemplate.Member] {
        let example = "live_activity: {event: update, content_state: {...}}"
        guard let entries = mapping(node, "live_activity", example: example)
        else { return [] }
        checkKeys(entries, allowed: PushField.liveActivityKeys, in: "live_activity")
        var members: [ValueTemplate.Member] = []
        var hasTimestamp = false
        for key in PushField.liveActivityKeys {
            guard let entry = node.entry(key) else { continue }
            let field = "live_activity." + key
            let value: ValueTemplate?
            switch key {
            case "event": value = typedField(entry.value, field: field, type: .choice(APNsPayload.liveActivityEvents))
            case "timestamp", "stale_date", "dismissal_date":
                value = typedField(entry.value, field: field, type: .unixTime)
            case "content_state", "attributes": value = typedField(entry.value, field: field, type: .object)
            case "attributes_type", "input_push_channel": value = typedField(entry.value, field: field, type: .text)
            default: value = flag(entry.value, field: field) == true ? .constant(.int(1)) : nil
            }
            if key == "timestamp" { hasTimestamp = true }
            if let value { members.append(.init(key: key.replacingUnderscores(), value: value)) }
        }
        if !hasTimestamp {
            // APNs ignores an update older than the one shown; the event's own time orders them right.
            members.insert(.init(key: "timestamp", value: .eventTime), at: 0)
        }
        guard let event = node.entry("event") else {
            report(node.position, "live_activity needs event: start, update or end")
            return members
        }
        // Starting and updating Live Activities with ActivityKit push notifications: every event carries
        // content-state (an end its final one), a start attributes-type and attributes; input_push_token
        // and input_push_channel are described only for a start.
        let eventName = event.value.scalarValue?.stringValue
        let required: [String]
        switch eventName {
        case "start": required = ["attributes_type", "attributes", "content_state"]
        case "update", "end": required = ["content_state"]
        default: required = []
        }
        if eventName == "update" || eventName == "end" {
            for key in ["input_push_token", "input_push_channel"] {
                if let entry = node.entry(key) {
                    report(
                        entry.keyPosition,
                        "live_activity.\(key) belongs to event: start; remove it from this \(eventName!)")
                }
            }
        }
        let missing = required.filter { node.entry($0) == nil }
        if !missing.isEmpty {
            report(
                node.position,
                "a Live Activity \(event.value.scalarValue?.stringValue ?? "") needs "
                    + missing.map { "live_activity.\($0)" }.joined(separator: ", "))
        }
        return members
    }
}
