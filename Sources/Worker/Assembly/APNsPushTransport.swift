// The APNs client as the pipeline's transport: one client per (credential, environment), chosen by
// the push's app and device environment, with the configured retry policy around every send.
public import APNs

public final class APNsPushTransport: PushTransport {
    /// Clients by bundle id, then environment (apps sharing a credential share its clients).
    let clients: [String: [APNsEnvironment: APNsClient]]
    let policy: RetryPolicy
    let observe: (@Sendable (PlannedPush, DeliveryResult) -> Void)?

    public init(
        clients: [String: [APNsEnvironment: APNsClient]], policy: RetryPolicy,
        observe: (@Sendable (PlannedPush, DeliveryResult) -> Void)? = nil
    ) {
        self.clients = clients
        self.policy = policy
        self.observe = observe
    }

    public func deliver(_ push: PlannedPush) async -> DeliveryResult {
        guard let client = clients[push.app]?[push.request.environment] else {
            return DeliveryResult(
                status: .failed, response: nil, attempts: [],
                summary: "no credential for \(push.app) in \(push.request.environment)")
        }
        let result = await client.send(push.request, policy: policy)
        observe?(push, result)
        return result
    }

    /// Closes every connection, letting in-flight requests finish within `gracePeriod`.
    public func shutdown(gracePeriod: Duration) async {
        var seen = Set<ObjectIdentifier>()
        for byEnvironment in clients.values {
            for client in byEnvironment.values where seen.insert(ObjectIdentifier(client)).inserted {
                await client.shutdown(gracePeriod: gracePeriod)
            }
        }
    }
}
