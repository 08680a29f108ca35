// The APNs client as the pipeline's transport: one client per (credential, environment), chosen by
// the push's app and device environment, with the configured retry policy around every send.
public import APNs
import Synchronization

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
        guard let client = client(for: push) else { return Self.noCredential(push) }
        let result = await client.send(push.request, policy: policy)
        observe?(push, result)
        return result
    }

    /// Every push's first attempt goes out at once and the caller waits once, for all of them: one
    /// continuation per event instead of a child task, a continuation and a cancellation handler per
    /// push (about a tenth of an event loop's time in `bench pipeline`). Pushes that need retries then
    /// retry concurrently, as `deliver` would.
    ///
    /// First attempts are not cancellable; each ends with its response or the request timeout.
    public func deliverAll(_ pushes: ArraySlice<PlannedPush>) async -> [DeliveryResult] {
        if pushes.isEmpty { return [] }
        let firstAttempts: [APNsClient.SendInProgress?] = await withUnsafeContinuation { continuation in
            let collector = FirstAttemptCollector(count: pushes.count, continuation)
            for (slot, push) in pushes.enumerated() {
                if let client = client(for: push) {
                    client.beginSend(push.request) { collector.store($0, at: slot) }
                } else {
                    collector.store(nil, at: slot)
                }
            }
        }
        var results: [DeliveryResult?] = []
        results.reserveCapacity(pushes.count)
        var retrying: [Int] = []
        for (slot, push) in pushes.enumerated() {
            guard let progress = firstAttempts[slot], let client = client(for: push) else {
                results.append(Self.noCredential(push))
                continue
            }
            if progress.isDelivered {
                results.append(await client.finishSend(progress, policy: policy))
            } else {
                // Retries wait (back-off, Retry-After): those of one event wait side by side.
                results.append(nil)
                retrying.append(slot)
            }
        }
        if retrying.count == 1, let progress = firstAttempts[retrying[0]],
            let client = client(for: pushes[pushes.startIndex + retrying[0]])
        {
            results[retrying[0]] = await client.finishSend(progress, policy: policy)
        } else if !retrying.isEmpty {
            let policy = self.policy
            await withTaskGroup(of: (Int, DeliveryResult).self) { group in
                for slot in retrying {
                    guard let progress = firstAttempts[slot],
                        let client = client(for: pushes[pushes.startIndex + slot])
                    else { continue }
                    group.addTask { (slot, await client.finishSend(progress, policy: policy)) }
                }
                for await (slot, result) in group { results[slot] = result }
            }
        }
        var delivered: [DeliveryResult] = []
        delivered.reserveCapacity(pushes.count)
        for (slot, push) in pushes.enumerated() {
            let result = results[slot]!
            observe?(push, result)
            delivered.append(result)
        }
        return delivered
    }

    private func client(for push: PlannedPush) -> APNsClient? {
        clients[push.app]?[push.request.environment]
    }

    private static func noCredential(_ push: PlannedPush) -> DeliveryResult {
        DeliveryResult(status: .failed, response: nil, attempts: [],
            summary: "no credential for \(push.app) in \(push.request.environment)")
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

/// Gathers the first attempts of one event's pushes, which end on loop threads in any order, and
/// resumes the waiting event with all of them once the last has ended.
private final class FirstAttemptCollector: Sendable {
    private let slots: Mutex<[APNsClient.SendInProgress?]>
    private let remaining: Atomic<Int>
    private let continuation: UnsafeContinuation<[APNsClient.SendInProgress?], Never>

    init(count: Int, _ continuation: UnsafeContinuation<[APNsClient.SendInProgress?], Never>) {
        slots = Mutex([APNsClient.SendInProgress?](repeating: nil, count: count))
        remaining = Atomic(count)
        self.continuation = continuation
    }

    /// Each slot exactly once (nil for a push that could not be sent).
    func store(_ progress: APNsClient.SendInProgress?, at slot: Int) {
        slots.withLock { $0[slot] = progress }
        guard remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        continuation.resume(returning: slots.withLock { $0 })
    }
}
