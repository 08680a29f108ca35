// What the simulator knows about device tokens: listed tokens that are unregistered, bad, or belong
// to another app, and rates that mark a stable share of all other tokens unregistered or bad.

/// Device token states, from configuration. Token keys are lowercase hex.
public struct DeviceStates: Sendable, Hashable {
    /// Tokens answered with 410 Unregistered, with the `timestamp` (ms since 1970) to report;
    /// nil reports the simulator's start time.
    public var unregistered: [String: Int64?] = [:]
    /// Tokens answered with 400 BadDeviceToken.
    public var badTokens: Set<String> = []
    /// Tokens that belong to a bundle id: a push to another topic gets 400 DeviceTokenNotForTopic.
    /// Listed tokens are registered: the rates below do not apply to them.
    public var bundleByToken: [String: String] = [:]
    /// Share of unlisted tokens answered 410 Unregistered, decided by a hash of the token so the same
    /// token always gets the same answer. Default: 0.
    public var unregisteredRate: Double = 0
    /// Share of unlisted tokens answered 400 BadDeviceToken (a slice disjoint from the unregistered one).
    /// Default: 0.
    public var badTokenRate: Double = 0

    public init() {}

    public func validate() throws(SimulatorError) {
        for (name, rate) in [("unregisteredRate", unregisteredRate), ("badTokenRate", badTokenRate)]
        where !(rate >= 0 && rate <= 1) {
            throw SimulatorError(.configuration, "devices.\(name) must be between 0 and 1, got \(rate)")
        }
        if unregisteredRate + badTokenRate > 1 {
            throw SimulatorError(.configuration, "devices: unregisteredRate + badTokenRate must not exceed 1")
        }
    }

    /// What APNs would say about this token for this bundle id; nil when the token is fine.
    /// - Parameters:
    ///   - token: lowercase hex.
    ///   - bundle: the topic without its push-type suffix.
    ///   - startMilliseconds: the default `timestamp` for unregistered tokens.
    func verdict(token: String, bundle: String, startMilliseconds: Int64) -> DeviceVerdict? {
        if badTokens.contains(token) { return .badDeviceToken }
        if let since = unregistered[token] { return .unregistered(since: since ?? startMilliseconds) }
        if let owner = bundleByToken[token] { return owner == bundle ? nil : .notForTopic }
        guard unregisteredRate > 0 || badTokenRate > 0 else { return nil }
        let share = StableHash.unit(token.utf8)
        if share < unregisteredRate { return .unregistered(since: startMilliseconds) }
        if share < unregisteredRate + badTokenRate { return .badDeviceToken }
        return nil
    }
}

/// A device token's state when it is not deliverable.
enum DeviceVerdict: Sendable, Hashable {
    case badDeviceToken
    case notForTopic
    case unregistered(since: Int64)
}
