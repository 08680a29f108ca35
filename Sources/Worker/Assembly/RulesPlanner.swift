// The rules engine as the pipeline's planner: evaluates an event and turns each decision into a
// send, skip or rejection for one device, refusing events for apps this worker has no credential for.

import APNs
public import PushRules

/// Plans pushes with the current rules of a `RulesStore` (so a reload takes effect on the next event).
public struct RulesPlanner: NotificationPlanner {
    let store: RulesStore
    /// Bundle ids with a credential; pushes for any other app cannot be sent.
    let configuredApps: Set<String>
    /// Told which rules matched, for the per-rule metric.
    let onMatch: (@Sendable ([String]) -> Void)?

    public init(store: RulesStore, configuredApps: Set<String>, onMatch: (@Sendable ([String]) -> Void)? = nil) {
        self.store = store
        self.configuredApps = configuredApps
        self.onMatch = onMatch
    }

    public func plan(_ event: PushEvent, now: Double) throws(PlanningError) -> EventPlan {
        if let app = event.app, !configuredApps.contains(app) {
            throw PlanningError(
                errorClass: "invalid_event",
                message: "app '\(app.prefix(100))' is not configured; configured apps: "
                    + configuredApps.sorted().joined(separator: ", "))
        }
        var result = store.current.evaluate(event.document, now: Int64(now))
        if !result.matchedRuleIDs.isEmpty { onMatch?(result.matchedRuleIDs) }
        var plan = EventPlan(capacity: result.decisions.count)
        // Each decision is moved out (the array reversed once, then popped from its end) and its push moved
        // on into the plan: `for decision in result.decisions` copied every decision, a retain and a
        // release for each field of its push and request, and the push again into the plan (figures:
        // docs/performance.md). Reversed in its buffer, whose swaps move the decisions: the array's own
        // `reverse()` copied each one it swapped.
        result.decisions.withUnsafeMutableBufferPointer { $0.reverse() }
        while let decision = result.decisions.popLast() {
            switch consume decision {
            case .send(let push):
                let device = EventDevice(
                    token: push.device.token ?? push.request.deviceToken?.hex ?? "",
                    environment: push.request.environment.rawValue, channelID: push.request.channelID?.value)
                let app = Self.bundle(of: push.request)
                guard configuredApps.contains(app) else {
                    plan.add(
                        .reject(
                            device: device, reason: "UnknownApp",
                            detail:
                                "rule '\(push.ruleID)' sends to app '\(app)', which has no credential in the configuration",
                            ruleID: push.ruleID, topic: push.request.topic, pushType: push.request.pushType.rawValue))
                    continue
                }
                let ruleID = push.ruleID
                // Taken out of the consumed push rather than copied: a copy retains each of the request's fields.
                plan.send(PlannedPush(request: (consume push).request, app: app, ruleID: ruleID), to: device)
            case .skip(let skip):
                plan.add(
                    .skip(
                        device: Self.device(skip.device), reason: skip.reason.rawValue, ruleID: skip.ruleID,
                        topic: nil, pushType: nil))
            case .reject(let rejection):
                plan.add(
                    .reject(
                        device: Self.device(rejection.device), reason: rejection.reason.rawValue,
                        detail: rejection.problems.joined(separator: "; "), ruleID: rejection.ruleID, topic: nil,
                        pushType: nil))
            }
        }
        return plan
    }

    /// The bundle id a request's topic belongs to (the topic without its push type's suffix).
    static func bundle(of request: APNsRequest) -> String {
        let suffix = request.pushType.topicSuffix
        guard !suffix.isEmpty, request.topic.hasSuffix(suffix) else { return request.topic }
        return String(request.topic.dropLast(suffix.count))
    }

    /// The device or channel a skip or rejection is for, as the event named it (and `PushEvent.devices`
    /// reads it).
    static func device(_ reference: DeviceReference?) -> EventDevice {
        let environment = EventDevice.environment(named: reference?.environment ?? "production")
        if let reference, let channel = reference.channelID {
            return EventDevice(token: "", environment: environment, channelID: channel)
        }
        return EventDevice(token: reference?.token ?? "", environment: environment)
    }
}
