// The payload rules of single push types and of Safari's `web.` topics, each with the Apple page
// that states it. Where Apple states nothing, nothing is checked.

public import JSON

extension APNsPayload {
    /// "To perform a silent background update, specify the value 1 and don't include the alert, badge,
    /// or sound keys" (Generating a remote notification, Table 1: content-available).
    static func checkBackground(_ aps: JSONObject, problems: inout [APNsRequestProblem]) {
        for member in aps where member.key != "content-available" && apsKeys.contains(member.key) {
            problems.append(
                APNsRequestProblem(
                    .payloadKeyNotAllowed, field: "payload.aps." + member.key,
                    "background pushes carry only \"content-available\": 1 in \"aps\"; remove \"\(member.key)\" "
                        + "(use push type alert to show an alert, badge or sound)"))
        }
        if aps["content-available"] == nil {
            problems.append(
                APNsRequestProblem(
                    .payloadMissingKey, field: "payload.aps.content-available",
                    #"background pushes need "content-available": 1 in "aps", as in {"aps":{"content-available":1}}"#))
        }
    }

    /// Starting and updating Live Activities with ActivityKit push notifications, "Construct the
    /// ActivityKit remote push notification payload" and "Construct the payload that starts a Live
    /// Activity":
    /// - `timestamp` and `event` (start, update, end) in every push;
    /// - `content-state` in every push: it is what the system decodes "to update or end the Live
    ///   Activity", and an end carries "the final content state";
    /// - a start also needs an `alert` and the `attributes-type` and `attributes` keys;
    /// - `input-push-token` (1) and `input-push-channel` are described only for a start (iOS 18),
    ///   where they ask for an update token or subscribe the new activity to a channel.
    static func checkLiveActivity(_ aps: JSONObject, problems: inout [APNsRequestProblem]) {
        func require(_ key: String, _ why: String) {
            if aps[key] == nil {
                problems.append(APNsRequestProblem(.payloadMissingKey, field: "payload.aps." + key, why))
            }
        }
        require("timestamp", "Live Activity pushes need \"timestamp\", the UNIX seconds the update was made")
        require("event", "Live Activity pushes need \"event\": start, update or end")
        guard let event = aps["event"]?.stringValue, liveActivityEvents.contains(event) else { return }
        require(
            "content-state",
            "a Live Activity \(event) needs \"content-state\", the activity's "
                + (event == "end" ? "final" : event == "start" ? "first" : "new") + " ContentState")
        if event == "start" {
            require("alert", "a Live Activity start needs an \"alert\", so the person sees what started")
            require(
                "attributes-type",
                "a Live Activity start needs \"attributes-type\", the name of its ActivityAttributes type")
            require("attributes", "a Live Activity start needs \"attributes\", the static ActivityAttributes values")
        } else {
            for key in ["input-push-token", "input-push-channel"] where aps[key] != nil {
                problems.append(
                    APNsRequestProblem(
                        .payloadKeyNotAllowed, field: "payload.aps." + key,
                        "\"\(key)\" belongs to a Live Activity start (event start); remove it from this \(event)"))
            }
        }
    }

    /// WidgetKit and control pushes: "In your request's aps dictionary, set the content-changed property
    /// to true" (Updating widgets with WidgetKit push notifications); the controls request carries the
    /// same `{"aps":{"content-changed":true}}` (Updating controls locally and remotely).
    static func checkContentChanged(_ aps: JSONObject, pushType: PushType, problems: inout [APNsRequestProblem]) {
        switch aps["content-changed"] {
        case nil:
            problems.append(
                APNsRequestProblem(
                    .payloadMissingKey, field: "payload.aps.content-changed",
                    "\(pushType) pushes need \"content-changed\": true in \"aps\", as in "
                        + #"{"aps":{"content-changed":true}}"#))
        case .bool(false)?:
            problems.append(
                outOfRange(
                    "payload.aps.content-changed",
                    "content-changed is false; \(pushType) pushes reload only with \"content-changed\": true"))
        default:
            break  // true, or a wrong type already reported with the aps keys
        }
    }

    /// Whether a topic is a Safari website push ID (`web.com.example`), whose pushes follow Safari's
    /// payload rules.
    public static func isWebTopic(_ topic: String) -> Bool {
        topic.utf8.count > 4 && topic.utf8.starts(with: "web.".utf8)
    }

    /// Safari Push Notifications (Notification Programming Guide for Websites, "Pushing Notifications"):
    /// `aps.alert` is a dictionary with `title` and `body`, and optionally `action`, the label of the
    /// action button; `aps.url-args` is an array of strings that fills the placeholders of the
    /// website's `urlFormatString` (its type is checked with the other `aps` keys). Apple states no push
    /// type rule for website pushes, so none is made.
    public static func validateWebPush(_ payload: JSONValue) -> [APNsRequestProblem] {
        guard case .object(let aps)? = payload.objectValue?["aps"] else { return [] }
        var problems: [APNsRequestProblem] = []
        let example =
            #"{"aps":{"alert":{"title":"Flight A998","body":"Boarding has begun.","action":"View"},"#
            + #""url-args":["boarding","A998"]}}"#
        switch aps["alert"] {
        case .object(let alert)?:
            for key in ["title", "body"] where alert[key] == nil {
                problems.append(
                    APNsRequestProblem(
                        .payloadMissingKey, field: "payload.aps.alert." + key,
                        "Safari website pushes need alert.\(key); for example \(example)"))
            }
            if let action = alert["action"], action.stringValue == nil {
                problems.append(wrongType("payload.aps.alert.action", action, "a string, the action button's label"))
            }
        case let other?:
            problems.append(
                wrongType(
                    "payload.aps.alert", other, "a dictionary with title, body and optionally action; \(example)"))
        case nil:
            problems.append(
                APNsRequestProblem(
                    .payloadMissingKey, field: "payload.aps.alert",
                    "Safari website pushes need an alert with title and body; for example \(example)"))
        }
        if aps["url-args"] == nil {
            problems.append(
                APNsRequestProblem(
                    .payloadMissingKey, field: "payload.aps.url-args",
                    "Safari website pushes need \"url-args\", the strings for the placeholders of the website's "
                        + "urlFormatString ([] when it has none); for example \(example)"))
        }
        return problems
    }
}

extension APNsPayload {
    /// Whether `pushTypeProblems` has anything to check for this push type and topic.
    package static func hasPushTypeRules(_ pushType: PushType, topic: String) -> Bool {
        switch pushType {
        case .liveactivity, .widgets, .controls: return true
        default: return isWebTopic(topic)
        }
    }

    /// Only the rules of the push type (Live Activity events, `content-changed`, Safari's alert and
    /// url-args), without the general `aps` key checks: what the simulator refuses, as a device would
    /// drop the push. APNs itself ignores unknown `aps` keys ("APNs ignores custom keys", Generating a
    /// remote notification), so the simulator does not refuse those.
    package static func pushTypeProblems(_ payload: JSONValue, pushType: PushType, topic: String)
        -> [APNsRequestProblem]
    {
        var problems: [APNsRequestProblem] = []
        if case .object(let aps)? = payload.objectValue?["aps"] {
            switch pushType {
            case .liveactivity: checkLiveActivity(aps, problems: &problems)
            case .widgets, .controls: checkContentChanged(aps, pushType: pushType, problems: &problems)
            default: break
            }
        }
        if isWebTopic(topic) { problems += validateWebPush(payload) }
        return problems
    }
}

extension APNsPayload {
    /// What a broadcast (channel) push may not carry besides the Live Activity rules: "You can't use
    /// broadcast push notifications to start a Live Activity" (Starting and updating Live Activities
    /// with ActivityKit push notifications). For the sender of `POST /4/broadcasts/apps/<bundle id>`.
    public static func validateBroadcast(_ payload: JSONValue) -> [APNsRequestProblem] {
        guard payload.objectValue?["aps"]?.objectValue?["event"]?.stringValue == "start" else { return [] }
        return [
            APNsRequestProblem(
                .payloadValueOutOfRange, field: "payload.aps.event",
                "a broadcast push cannot start a Live Activity; send event update or end on the channel, and start "
                    + "the activity on each device (a push with input-push-channel, or from the app)")
        ]
    }
}
