// Which push types the rules send, by app: what a configuration check needs to know which topics an
// app's certificate must list (Apple: a certificate pushes only to the topics it names).

public import APNs

/// The push types of a rule set's send rules.
public struct RulePushTypes: Sendable, Hashable {
    /// Push types of rules that name their app (or a constant topic), by bundle id.
    public var byApp: [String: Set<PushType>] = [:]
    /// Push types of rules whose app comes from the event: they may send to any configured app.
    public var anyApp: Set<PushType> = []

    /// Every push type the rules may send to `bundle` with.
    public func pushTypes(forApp bundle: String) -> Set<PushType> { anyApp.union(byApp[bundle] ?? []) }
}

extension RuleSet {
    /// The push types the send rules use, by the app they name.
    public var pushTypes: RulePushTypes {
        var result = RulePushTypes()
        for rule in rules {
            guard case .send(let plan) = rule.action else { continue }
            if let app = plan.app?.constantText {
                result.byApp[app, default: []].insert(plan.pushType)
            } else if let topic = plan.topic?.constantText {
                let suffix = plan.pushType.topicSuffix
                let bundle = !suffix.isEmpty && topic.hasSuffix(suffix) ? String(topic.dropLast(suffix.count)) : topic
                result.byApp[bundle, default: []].insert(plan.pushType)
            } else {
                result.anyApp.insert(plan.pushType)
            }
        }
        return result
    }
}
