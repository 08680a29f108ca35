// An event's broadcast channels (`channels: [{id, environment}]`): each matching rule's request is
// rendered as for a device and sent as a broadcast on the channel (Apple, "Sending broadcast push
// notification requests to APNs": push type liveactivity, the channel in apns-channel-id).

import APNs

extension RuleSet {
    static func broadcastDecision(
        rule: CompiledRule, pushType: PushType, shared: PreparedRequest, reference: DeviceReference,
        channel text: String, ids: inout RequestIDs
    ) -> PushDecision {
        var problems: [String] = []
        var channel: ChannelID?
        do { channel = try ChannelID(text) } catch {
            problems.append("channels[\(reference.index)].id: \(error.message)")
        }
        var environment: APNsEnvironment?
        switch reference.environment {
        case "production"?: environment = .production
        case "sandbox"?, "development"?: environment = .sandbox
        default: problems.append("channels[\(reference.index)] has no environment (production or sandbox)")
        }
        guard let channel, let environment else {
            return .reject(
                RejectedPush(
                    reason: .invalidDevice, ruleID: rule.id, device: reference, pushType: pushType, problems: problems))
        }
        var request = shared.request
        request.target = .channel(channel)
        request.environment = environment
        request.apnsID = ids.next()
        // The broadcast rules (liveactivity only) are checked once per request: a rule's device copies
        // skip them, a channel copy does not.
        let found = request.validateRemembering()
        if !found.isEmpty {
            return .reject(
                RejectedPush(
                    reason: .invalidRequest, ruleID: rule.id, device: reference, pushType: pushType,
                    problems: found.map { "channels[\(reference.index)]: \($0.description)" }))
        }
        return .send(PreparedPush(ruleID: rule.id, device: reference, request: request, notes: shared.notes))
    }
}
