// Compiling a rule's notification fields (merged over `defaults`) into a PushPlan, with the checks
// Apple would otherwise make per request: priority and topic for the push type, the `aps` keys
// each push type carries, Live Activity requirements, collapse id length.

import APNs
import JSON

/// The notification fields a rule (or `defaults`) can set.
enum PushField {
    static let headerNames = ["app", "topic", "push_type", "priority", "ttl", "collapse_id"]
    /// Fields that go into `aps`, in the order they are written there.
    static let apsNames = [
        "alert", "badge", "sound", "thread_id", "category", "content_available", "mutable_content",
        "target_content_id", "interruption_level", "relevance_score", "filter_criteria", "live_activity",
    ]
    static let otherNames = ["custom", "accept_overrides", "shorten"]
    static let allNames = headerNames + apsNames + otherNames

    static let alertTextKeys = [
        "title", "subtitle", "body", "launch_image", "title_loc_key", "subtitle_loc_key", "loc_key",
    ]
    static let alertListKeys = ["title_loc_args", "subtitle_loc_args", "loc_args"]
    static let liveActivityKeys = [
        "timestamp", "event", "content_state", "stale_date", "dismissal_date", "attributes_type", "attributes",
        "input_push_token", "input_push_channel",
    ]

    /// The `aps` fields a push type carries; the rest of its payload is `custom`.
    static func apsNames(for pushType: PushType) -> [String] {
        switch pushType {
        case .alert: return apsNames.filter { $0 != "live_activity" }
        case .liveactivity: return ["alert", "sound", "relevance_score", "live_activity"]
        case .background: return ["content_available"]
        default: return []
        }
    }

    /// Why a push type does not carry an `aps` field, and what to do instead.
    static func notCarried(_ name: String, by pushType: PushType) -> String {
        switch pushType {
        case .background:
            return "background pushes carry only content-available in aps (APNs rejects alert, badge and sound "
                + "there); remove '\(name)', use push_type: alert, or put app data under custom"
        case .widgets, .controls:
            return "\(pushType) pushes carry only content-changed (added for you); remove '\(name)'"
        case .liveactivity:
            return "liveactivity pushes carry alert, sound, relevance_score and live_activity; remove '\(name)'"
        case .alert:
            return "live_activity needs push_type: liveactivity"
        default:
            return "\(pushType) pushes hand the payload to the app, without aps; put '\(name)' data under custom"
        }
    }
}

extension RulesFileDecoder {
    /// Builds the plan from the merged fields. With `checkingDefaultsOnly`, checks each field on its own
    /// (the `defaults` block) and skips the checks that need a whole rule.
    mutating func decodePushPlan(
        _ fields: [String: FieldSource], at position: SourcePosition,
        checkingDefaultsOnly: Bool
    ) -> PushPlan? {
        let problemCount = problems.count
        var pushType = PushType.alert
        if let field = fields["push_type"] {
            if let text = field.node.scalarValue?.stringValue, let type = PushType(rawValue: text) {
                pushType = type
            } else {
                let text = field.node.scalarValue?.stringValue ?? describeScalar(field.node)
                let names = PushType.allCases.map(\.rawValue)
                report(
                    field.node.position,
                    "push_type '\(text)' is not an APNs push type"
                        + Spelling.suggestion(for: text, among: names) + "; use one of " + names.joined(separator: ", ")
                )
            }
        }

        // Fields this push type does not carry: an error in the rule itself, silently not applied
        // when they come from `defaults` (which serve rules of every push type).
        let carried = Set(PushField.apsNames(for: pushType))
        var fields = fields
        if !checkingDefaultsOnly {
            for name in PushField.apsNames where fields[name] != nil && !carried.contains(name) {
                if !fields[name]!.fromDefaults {
                    report(fields[name]!.entry.keyPosition, PushField.notCarried(name, by: pushType))
                }
                fields[name] = nil
            }
        }

        let priority = decodePriority(
            fields["priority"], pushType: pushType, checkingDefaultsOnly: checkingDefaultsOnly)
        let ttl = fields["ttl"].flatMap { decodeDuration($0.node) }
        let (app, topic) = decodeTopic(
            fields, pushType: pushType, at: position,
            checkingDefaultsOnly: checkingDefaultsOnly)
        var collapseID: Template?
        if let field = fields["collapse_id"] {
            collapseID = compileTemplate(field.node, field: "collapse_id")
            if let text = collapseID?.constantText {
                do { _ = try CollapseID(text) } catch { report(field.node.position, "collapse_id: \(error.message)") }
            }
        }

        var aps: [ValueTemplate.Member] = []
        switch pushType {
        case .background:
            if let field = fields["content_available"], flag(field.node, field: "content_available") == false {
                report(field.node.position, "background pushes need content-available; remove content_available: false")
            }
            aps.append(.init(key: "content-available", value: .constant(.int(1))))
        case .widgets, .controls:
            aps.append(.init(key: "content-changed", value: .constant(.bool(true))))
        default:
            aps = decodeAPSFields(fields)
        }

        var root: [ValueTemplate.Member] = []
        if !aps.isEmpty || APNsPayload.requiresAPS(pushType) { root.append(.init(key: "aps", value: .object(aps))) }
        if let field = fields["custom"] { root += decodeCustom(field.node) }
        let payload = ValueTemplate.object(root)

        let accepted = fields["accept_overrides"].map { decodeOverrides($0.node) } ?? []
        let shorten = decodeShorten(
            fields["shorten"]?.node, payload: payload, checkingDefaultsOnly: checkingDefaultsOnly)

        guard problems.count == problemCount, !checkingDefaultsOnly else { return nil }
        let readsDevice =
            (app?.readsDevice ?? false) || (topic?.readsDevice ?? false)
            || (collapseID?.readsDevice ?? false) || payload.readsDevice
        return PushPlan(
            pushType: pushType, app: app, topic: topic, priority: priority, ttl: ttl, collapseID: collapseID,
            payload: payload, acceptedOverrides: accepted,
            apsKeys: Set(aps.map(\.key)).union(
                carried.map { $0.replacingUnderscores() }),
            shorten: shorten, readsDevice: readsDevice,
            readsLocale: (app?.readsLocale ?? false) || (topic?.readsLocale ?? false)
                || (collapseID?.readsLocale ?? false) || payload.readsLocale)
    }

    private mutating func decodePriority(_ field: FieldSource?, pushType: PushType, checkingDefaultsOnly: Bool)
        -> APNsPriority
    {
        guard let field else { return pushType.defaultPriority }
        guard let number = field.node.scalarValue?.intValue else {
            report(field.node.position, "priority must be 10, 5 or 1, found \(describeScalar(field.node))")
            return pushType.defaultPriority
        }
        let priority: APNsPriority
        do { priority = try APNsPriority(Int(clamping: number)) } catch {
            report(field.node.position, error.message)
            return pushType.defaultPriority
        }
        if pushType.allowedPriorities.contains(priority) || checkingDefaultsOnly { return priority }
        if !field.fromDefaults {
            let allowed = pushType.allowedPriorities.map(\.headerValue).joined(separator: " or ")
            report(
                field.node.position,
                "priority \(priority) is not allowed for \(pushType) pushes (APNs rejects it "
                    + "with BadPriority); use \(allowed)")
        }
        return pushType.defaultPriority
    }

    /// `ttl`: seconds, or a duration such as 90s, 15m, 1h, 2d, 1h30m; 0 means "try once, do not store".
    mutating func decodeDuration(_ node: SourceNode) -> Int64? {
        let usage = "ttl is seconds or a duration such as 90s, 15m, 1h, 2d or 1h30m (0: try once, do not store)"
        if let number = node.scalarValue?.intValue {
            guard number >= 0 else {
                report(node.position, "ttl is negative; \(usage)")
                return nil
            }
            return number
        }
        guard let text = node.scalarValue?.stringValue, !text.isEmpty else {
            report(node.position, "\(usage); found \(describeScalar(node))")
            return nil
        }
        var total: Int64 = 0
        var digits: Int64?
        for character in text {
            if let digit = character.wholeNumberValue, character.isASCII {
                digits = (digits ?? 0) * 10 + Int64(digit)
                if digits! > 10_000_000 { break }
                continue
            }
            let unit: Int64
            switch character {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86_400
            case "w": unit = 604_800
            default:
                report(node.position, "'\(text)' is not a duration; \(usage)")
                return nil
            }
            guard let value = digits else {
                report(node.position, "'\(text)' is not a duration; \(usage)")
                return nil
            }
            total += value * unit
            digits = nil
        }
        if digits != nil || total > 366 * 86_400 {
            report(
                node.position,
                digits != nil
                    ? "'\(text)' is not a duration (a number needs a unit); \(usage)"
                    : "ttl '\(text)' is over a year; APNs does not keep notifications that long")
            return nil
        }
        return total
    }

    private mutating func decodeTopic(
        _ fields: [String: FieldSource], pushType: PushType, at position: SourcePosition,
        checkingDefaultsOnly: Bool
    ) -> (app: Template?, topic: Template?) {
        if let field = fields["topic"] {
            if let app = fields["app"], !app.fromDefaults, !field.fromDefaults {
                report(
                    app.entry.keyPosition,
                    "give either app (the bundle id; the push type's suffix is added) "
                        + "or topic (used as given), not both")
            }
            let topic = compileTemplate(field.node, field: "topic")
            if let text = topic?.constantText, !checkingDefaultsOnly {
                for problem in topicProblems(text, pushType) { report(field.node.position, "topic: \(problem)") }
            }
            return (nil, topic)
        }
        if pushType == .mdm, !checkingDefaultsOnly {
            report(
                position,
                "mdm pushes need 'topic': the push magic topic from the MDM certificate "
                    + "(com.apple.mgmt.External.<uuid>)")
        }
        let app: Template?
        if let field = fields["app"] {
            app = compileTemplate(field.node, field: "app")
            if let text = app?.constantText, !checkingDefaultsOnly {
                for problem in topicProblems(pushType.topic(forBundle: text), pushType) {
                    report(field.node.position, "app: \(problem)")
                }
            }
        } else {
            app = try? TemplateParser.parse("{{ event.app }}").0
        }
        return (app, nil)
    }

    /// What the request model says about a fixed topic.
    private func topicProblems(_ topic: String, _ pushType: PushType) -> [String] {
        guard let token = try? DeviceToken(bytes: [UInt8](repeating: 0xAB, count: 32)) else { return [] }
        let request = APNsRequest(
            deviceToken: token, environment: .production, topic: topic, pushType: pushType, payload: [:])
        return request.validate().filter { $0.field == "apns-topic" }.map(\.message)
    }

    private mutating func decodeCustom(_ node: SourceNode) -> [ValueTemplate.Member] {
        guard let entries = mapping(node, "custom", example: "custom: {thread: \"{{ event.data.thread_id }}\"}")
        else { return [] }
        var members: [ValueTemplate.Member] = []
        for entry in entries {
            if entry.key == "aps" {
                report(entry.keyPosition, "custom cannot set 'aps'; use the rule's fields (alert, badge, sound, ...)")
                continue
            }
            if let value = valueTree(entry.value, field: "custom." + entry.key) {
                members.append(.init(key: entry.key, value: value))
            }
        }
        return members
    }

    private mutating func decodeOverrides(_ node: SourceNode) -> Set<OverrideField> {
        let names = OverrideField.allCases.map(\.rawValue)
        switch node.scalarValue?.stringValue {
        case "all": return Set(OverrideField.allCases)
        case "none": return []
        default: break
        }
        guard let elements = node.elements else {
            report(
                node.position,
                "accept_overrides is a list of fields the event's apns block may set ("
                    + names.joined(separator: ", ") + "), or all, or none")
            return []
        }
        var accepted: Set<OverrideField> = []
        for element in elements {
            let text = element.scalarValue?.stringValue ?? ""
            if let field = OverrideField(rawValue: text) {
                accepted.insert(field)
            } else {
                report(
                    element.position,
                    "'\(text)' cannot be overridden"
                        + Spelling.suggestion(for: text, among: names) + "; overridable: "
                        + names.joined(separator: ", "))
            }
        }
        return accepted
    }

    private mutating func decodeShorten(_ node: SourceNode?, payload: ValueTemplate, checkingDefaultsOnly: Bool)
        -> [ShortenPath]
    {
        guard let node else {
            if payload.leaf(at: ["aps", "alert", "body"]) != nil {
                return [ShortenPath(name: "alert.body", wire: ["aps", "alert", "body"])]
            }
            if case .template? = payload.leaf(at: ["aps", "alert"]) {
                return [ShortenPath(name: "alert", wire: ["aps", "alert"])]
            }
            return []
        }
        let names: [(String, SourcePosition)]
        if let text = node.scalarValue?.stringValue {
            names = [(text, node.position)]
        } else if let elements = node.elements, elements.allSatisfy({ $0.scalarValue?.stringValue != nil }) {
            names = elements.map { ($0.scalarValue!.stringValue!, $0.position) }
        } else {
            report(
                node.position,
                "shorten names the text field to shorten when the payload is too large, "
                    + "e.g. shorten: alert.body (or a list, tried in order)")
            return []
        }
        if checkingDefaultsOnly { return [] }
        var paths: [ShortenPath] = []
        for (name, position) in names {
            let parts = name.split(separator: ".").map(String.init)
            var wire: [String]
            switch parts.first {
            case "alert": wire = ["aps", "alert"] + parts.dropFirst()
            case "custom": wire = Array(parts.dropFirst())
            case "live_activity":
                wire =
                    ["aps"]
                    + parts.dropFirst().enumerated().map {
                        $0.offset == 0
                            ? $0.element.replacingUnderscores()
                            : $0.element
                    }
            default: wire = []
            }
            var isText = false
            if !wire.isEmpty, let leaf = payload.leaf(at: wire[...]) {
                switch leaf {
                case .template(_, .text, _), .template(_, .any, _), .constant(.string): isText = true
                default: break
                }
            }
            if isText {
                paths.append(ShortenPath(name: name, wire: wire))
            } else {
                report(
                    position,
                    "shorten: '\(name)' is not a text field this rule sets; name one such as "
                        + "alert.body, alert.title or custom.<key>")
            }
        }
        return paths
    }
}

extension String {
    /// `thread_id` → `thread-id`: the rules file's names to APNs' keys.
    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}
