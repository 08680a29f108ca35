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
        // The work between the awaits is in synchronous helpers, so that this function's async frame
        // stays small: a record's frames that outgrow its task's first allocator slab cost a malloc.
        let firstAttempts = await sendFirstAttempts(pushes)
        var results = settledResults(pushes, firstAttempts)
        if results.contains(where: { $0 == nil }) { await retry(firstAttempts, into: &results) }
        return observed(pushes, results)
    }

    /// Each push's first attempt with the client that sent it; nil for a push without a credential.
    private func sendFirstAttempts(_ pushes: ArraySlice<PlannedPush>) async -> [FirstAttempt?] {
        await withUnsafeContinuation { continuation in
            let collector = FirstAttemptCollector(count: pushes.count, continuation)
            for (slot, push) in pushes.enumerated() {
                if let client = client(for: push) {
                    client.beginSend(push.request) { progress in
                        collector.store(FirstAttempt(client: client, progress: progress), at: slot)
                    }
                } else {
                    collector.store(nil, at: slot)
                }
            }
        }
    }

    /// Each push's result where its first attempt settled it; nil where the policy retries.
    private func settledResults(_ pushes: ArraySlice<PlannedPush>, _ firstAttempts: [FirstAttempt?])
        -> [DeliveryResult?]
    {
        var results: [DeliveryResult?] = []
        results.reserveCapacity(pushes.count)
        for (slot, push) in pushes.enumerated() {
            if let first = firstAttempts[slot] {
                results.append(first.client.settledResult(first.progress, policy: policy))
            } else {
                results.append(Self.noCredential(push))
            }
        }
        return results
    }

    /// The retries, which wait (back-off, Retry-After): those of one event wait side by side.
    private func retry(_ firstAttempts: [FirstAttempt?], into results: inout [DeliveryResult?]) async {
        let policy = self.policy
        var retries: [(slot: Int, first: FirstAttempt)] = []
        for (slot, first) in firstAttempts.enumerated() where results[slot] == nil {
            if let first { retries.append((slot, first)) }
        }
        if retries.count == 1 {
            let (slot, first) = retries[0]
            results[slot] = await first.client.finishSend(first.progress, policy: policy)
            return
        }
        let finished = await withTaskGroup(of: (Int, DeliveryResult).self) { group in
            for (slot, first) in retries {
                group.addTask { (slot, await first.client.finishSend(first.progress, policy: policy)) }
            }
            return await group.reduce(into: [(Int, DeliveryResult)]()) { $0.append($1) }
        }
        for (slot, result) in finished { results[slot] = result }
    }

    private func observed(_ pushes: ArraySlice<PlannedPush>, _ results: [DeliveryResult?]) -> [DeliveryResult] {
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

/// A push's first attempt and the client that sent it (and retries it).
private struct FirstAttempt: Sendable {
    let client: APNsClient
    let progress: APNsClient.SendInProgress
}

/// Gathers the first attempts of one event's pushes, which end on loop threads in any order, and
/// resumes the waiting event with all of them once the last has ended.
private final class FirstAttemptCollector: Sendable {
    private let slots: Mutex<[FirstAttempt?]>
    private let remaining: Atomic<Int>
    private let continuation: UnsafeContinuation<[FirstAttempt?], Never>

    init(count: Int, _ continuation: UnsafeContinuation<[FirstAttempt?], Never>) {
        slots = Mutex([FirstAttempt?](repeating: nil, count: count))
        remaining = Atomic(count)
        self.continuation = continuation
    }

    /// Each slot exactly once (nil for a push that could not be sent).
    func store(_ first: FirstAttempt?, at slot: Int) {
        slots.withLock { $0[slot] = first }
        guard remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        continuation.resume(returning: slots.withLock { $0 })
    }
}
