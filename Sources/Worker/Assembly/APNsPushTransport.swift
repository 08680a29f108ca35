// The APNs client as the pipeline's transport: one client per (credential, environment), chosen by
// the push's app and device environment, with the configured retry policy around every send. A token
// refused with BadDeviceToken is tried once in the app's other environment, since that answer most
// often means a development build's token sent to production (or the reverse), not a dead token.

public import APNs
import HTTP2
import Synchronization

public final class APNsPushTransport: PushTransport {
    /// Clients by bundle id, then environment (apps sharing a credential share its clients).
    let clients: [String: [APNsEnvironment: APNsClient]]
    let policy: RetryPolicy
    /// Told each push's final result (for metrics of retries and invalid tokens).
    let observe: (@Sendable (DeliveryResult) -> Void)?
    /// Each pool that pushes go through, once: a client sends to its own environment's pool, and apps
    /// that share a credential share their clients. Fixed at init, so sizing reads only their statistics.
    let pools: [ConnectionPool]
    /// Each client once (apps that share a credential share its clients), fixed at init.
    let distinctClients: [APNsClient]

    public init(
        clients: [String: [APNsEnvironment: APNsClient]], policy: RetryPolicy,
        observe: (@Sendable (DeliveryResult) -> Void)? = nil
    ) {
        self.clients = clients
        self.policy = policy
        self.observe = observe
        var seen: Set<ObjectIdentifier> = []
        pools = clients.values.flatMap { byEnvironment in
            byEnvironment.map { environment, client in client.pool(for: environment) }
        }.filter { seen.insert(ObjectIdentifier($0)).inserted }
        distinctClients = clients.values.flatMap(\.values).filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    /// Device tokens whose pushes are paced after 429 TooManyRequests, across every client.
    public var throttledDevices: Int {
        distinctClients.reduce(0) { $0 + $1.deviceThrottle.throttledDevices }
    }

    /// Every pool's streams, with room to grow (`ConnectionPool.Statistics.streamCapacityWithGrowth`).
    public var streamCapacity: Int? {
        pools.reduce(0) { $0 + $1.statistics.streamCapacityWithGrowth }
    }

    public func deliver(_ push: PlannedPush) async -> DeliveryResult {
        guard let client = client(for: push) else { return Self.noCredential(push) }
        let firstEnvironment = await client.send(push.request, policy: policy)
        let result = await inOtherEnvironmentIfRefused(push, firstEnvironment)
        observe?(result)
        return result
    }

    /// Every push's first attempt goes out at once and the caller waits once, for all of them: one
    /// continuation per event instead of a child task, a continuation and a cancellation handler per
    /// push (about a tenth of an event loop's time in `bench pipeline`). Pushes that need retries then
    /// retry concurrently, as `deliver` would.
    ///
    /// First attempts are not cancellable; each ends with its response or the request timeout.
    public func deliverAll(_ pushes: ArraySlice<PlannedPush>) async -> [DeliveryResult] {
        await deliverAll(pushes, withdrawal: nil)
    }

    /// Pushes that wait (for a pool that is down, a retry's delay, a paced device) when `withdrawal` is
    /// withdrawn end `withdrawn`, unsent.
    public func deliverAll(_ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?) async -> [DeliveryResult] {
        if pushes.isEmpty { return [] }
        // The work between the awaits is in synchronous helpers, never inlined here, so that this
        // function's async frame stays small: it is allocated whole for every record and held for the
        // round trip to APNs, and the helpers' locals inlined into it took it from 304 to 1,312 bytes
        // (about 8 MB more at 8,000 records in flight; frames that outgrow the task's first allocator
        // slab also cost a malloc each).
        let firstAttempts = await sendFirstAttempts(pushes)
        var results = settledResults(pushes, firstAttempts)
        if results.contains(where: { $0 == nil }) { await retry(firstAttempts, into: &results, withdrawal: withdrawal) }
        if needsOtherEnvironment(pushes, results) {
            await tryOtherEnvironments(pushes, into: &results, withdrawal: withdrawal)
        }
        // Moved, not passed: the array stayed referenced here, and `observed` taking each result out of it
        // copied the whole array first (every result retained, and an allocation per event).
        return observed(consume results)
    }

    /// `deliverAll(_:withdrawal:)` without a task, for a caller on an event loop: the first attempts start
    /// now, and when the last has ended (on the loop that read its response) `completion` gets the results
    /// right there, unless a push needs a retry or the other environment, which wait in a task.
    ///
    /// A task per record (resumed when a record arrives, and again when its responses do) cost the event
    /// loops the concurrency runtime's share of their time: its enqueue, executor-preference lookups and
    /// task switches (figures: docs/performance.md).
    public func beginDeliverAll(
        _ pushes: ArraySlice<PlannedPush>, withdrawal: SendWithdrawal?,
        completion: @escaping @Sendable ([DeliveryResult]) -> Void
    ) {
        if pushes.isEmpty { return completion([]) }
        let collector = FirstAttemptCollector(count: pushes.count) { [self] firstAttempts in
            finishDelivery(pushes, firstAttempts, withdrawal: withdrawal, completion: completion)
        }
        beginFirstAttempts(pushes, into: collector)
    }

    /// What `beginDeliverAll` does once every first attempt has ended.
    @inline(never)
    private func finishDelivery(
        _ pushes: ArraySlice<PlannedPush>, _ firstAttempts: [FirstAttempt?], withdrawal: SendWithdrawal?,
        completion: @escaping @Sendable ([DeliveryResult]) -> Void
    ) {
        let results = settledResults(pushes, firstAttempts)
        let needsRetry = results.contains(where: { $0 == nil })
        if !needsRetry && !needsOtherEnvironment(pushes, results) { return completion(observed(results)) }
        Task {
            var results = results
            if needsRetry { await retry(firstAttempts, into: &results, withdrawal: withdrawal) }
            if needsOtherEnvironment(pushes, results) {
                await tryOtherEnvironments(pushes, into: &results, withdrawal: withdrawal)
            }
            completion(observed(consume results))
        }
    }

    /// Each push's first attempt with the client that sent it; nil for a push without a credential.
    private func sendFirstAttempts(_ pushes: ArraySlice<PlannedPush>) async -> [FirstAttempt?] {
        await withUnsafeContinuation { continuation in
            beginFirstAttempts(pushes, into: FirstAttemptCollector(count: pushes.count, continuation))
        }
    }

    /// Starts each push's first attempt; `collector` gathers them as they end.
    private func beginFirstAttempts(_ pushes: ArraySlice<PlannedPush>, into collector: FirstAttemptCollector) {
        // By index, not `for push in pushes` (binding a push copies all its fields), and with the
        // client of the previous push at hand: an event's pushes mostly share app and environment,
        // and each lookup hashes both.
        var previous: (app: String, environment: APNsEnvironment, client: APNsClient?)?
        for (slot, index) in pushes.indices.enumerated() {
            let app = pushes[index].app
            let environment = pushes[index].request.environment
            let client: APNsClient?
            if let previous, previous.app == app, previous.environment == environment {
                client = previous.client
            } else {
                client = self.client(app: app, environment: environment)
                previous = (app, environment, client)
            }
            if let client {
                client.beginSend(pushes[index].request, slot: slot, to: collector)
            } else {
                collector.store(nil, at: slot)
            }
        }
    }

    /// Each push's result where its first attempt settled it; nil where the policy retries.
    @inline(never)
    private func settledResults(_ pushes: ArraySlice<PlannedPush>, _ firstAttempts: [FirstAttempt?])
        -> [DeliveryResult?]
    {
        var results: [DeliveryResult?] = []
        results.reserveCapacity(pushes.count)
        // By index, not `for push in pushes`: binding each push would copy (retain) all its fields, for
        // the rare push without a credential.
        for (slot, index) in pushes.indices.enumerated() {
            if let first = firstAttempts[slot] {
                results.append(first.client.settledResult(first, policy: policy))
            } else {
                results.append(Self.noCredential(pushes[index]))
            }
        }
        return results
    }

    /// The retries, which wait (back-off, Retry-After): those of one event wait side by side.
    private func retry(
        _ firstAttempts: [FirstAttempt?], into results: inout [DeliveryResult?], withdrawal: SendWithdrawal?
    ) async {
        let policy = self.policy
        var retries: [(slot: Int, first: FirstAttempt)] = []
        for (slot, first) in firstAttempts.enumerated() where results[slot] == nil {
            if let first { retries.append((slot, first)) }
        }
        if retries.count == 1 {
            let (slot, first) = retries[0]
            results[slot] = await first.client.finishSend(first, policy: policy, withdrawal: withdrawal)
            return
        }
        let finished = await withTaskGroup(of: (Int, DeliveryResult).self) { group in
            for (slot, first) in retries {
                group.addTask { (slot, await first.client.finishSend(first, policy: policy, withdrawal: withdrawal)) }
            }
            return await group.reduce(into: [(Int, DeliveryResult)]()) { $0.append($1) }
        }
        for (slot, result) in finished { results[slot] = result }
    }

    @inline(never)
    private func needsOtherEnvironment(_ pushes: ArraySlice<PlannedPush>, _ results: [DeliveryResult?]) -> Bool {
        zip(pushes.indices, results).contains { index, result in
            guard let result, result.response?.reason == .badDeviceToken else { return false }
            return otherEnvironmentClient(for: pushes[index], after: result) != nil
        }
    }

    /// The pushes refused with BadDeviceToken, each tried in the other environment, side by side.
    private func tryOtherEnvironments(
        _ pushes: ArraySlice<PlannedPush>, into results: inout [DeliveryResult?], withdrawal: SendWithdrawal?
    ) async {
        var refused: [(slot: Int, push: PlannedPush, result: DeliveryResult)] = []
        for (slot, (push, result)) in zip(pushes, results).enumerated() {
            guard let result, otherEnvironmentClient(for: push, after: result) != nil else { continue }
            refused.append((slot, push, result))
        }
        let finished = await withTaskGroup(of: (Int, DeliveryResult).self) { group in
            for (slot, push, result) in refused {
                group.addTask { (slot, await self.inOtherEnvironmentIfRefused(push, result, withdrawal: withdrawal)) }
            }
            return await group.reduce(into: [(Int, DeliveryResult)]()) { $0.append($1) }
        }
        for (slot, result) in finished { results[slot] = result }
    }

    /// The client of the push's app in the environment it was not sent to, when APNs refused the push
    /// with BadDeviceToken and the app has that environment configured.
    private func otherEnvironmentClient(for push: PlannedPush, after result: DeliveryResult) -> APNsClient? {
        guard result.response?.reason == .badDeviceToken else { return nil }
        return clients[push.app]?[push.request.environment.other]
    }

    /// `result` as it is, or, when APNs refused the token with BadDeviceToken and the app has the other
    /// environment, the push sent there once more (a fresh apns-id; the same breaker and retry policy as
    /// any send) with both environments' attempts. What the other environment answered is final: the
    /// token is only invalid when both refuse it (`EnvironmentsAsked`).
    private func inOtherEnvironmentIfRefused(
        _ push: PlannedPush, _ result: DeliveryResult, withdrawal: SendWithdrawal? = nil
    ) async -> DeliveryResult {
        guard let client = otherEnvironmentClient(for: push, after: result) else { return result }
        var request = push.request
        request.environment = push.request.environment.other
        request.apnsID = .random()
        let retried = await client.send(request, policy: policy, withdrawal: withdrawal)
        return DeliveryResult(
            status: retried.status, response: retried.response, attempts: result.attempts + retried.attempts,
            summary: "BadDeviceToken in \(push.request.environment); in \(request.environment): \(retried.summary)",
            expiryReason: retried.expiryReason)
    }

    /// The results, each told to `observe`: moved out of `results`, never copied.
    @inline(never)
    private func observed(_ results: consuming [DeliveryResult?]) -> [DeliveryResult] {
        var delivered: [DeliveryResult] = []
        delivered.reserveCapacity(results.count)
        for slot in results.indices {
            let result = results[slot].take()!
            observe?(result)
            delivered.append(result)
        }
        return delivered
    }

    private func client(for push: PlannedPush) -> APNsClient? {
        client(app: push.app, environment: push.request.environment)
    }

    private func client(app: String, environment: APNsEnvironment) -> APNsClient? {
        clients[app]?[environment]
    }

    private static func noCredential(_ push: PlannedPush) -> DeliveryResult {
        DeliveryResult(
            status: .failed, response: nil, attempts: [],
            summary: "no credential for \(push.app) in \(push.request.environment)")
    }

    /// Closes every connection, letting in-flight requests finish within `gracePeriod`.
    public func shutdown(gracePeriod: Duration) async {
        for client in distinctClients { await client.shutdown(gracePeriod: gracePeriod) }
    }
}

extension APNsEnvironment {
    /// The environment a token of this one is tried in after BadDeviceToken.
    var other: APNsEnvironment { self == .production ? .sandbox : .production }
}

/// The environments that answered a push, in order, read from its result: the first is the one the
/// event named for the device; a second means `APNsPushTransport` sent it again there after
/// BadDeviceToken. The last one gave the result's final answer.
///
/// Read from the attempts because a result carries no environment: BadDeviceToken ends a send (the
/// retry policy never repeats an invalid-token answer), so an attempt answered BadDeviceToken that
/// is not the last one is where the transport moved the push to the other environment.
struct EnvironmentsAsked: Sendable, Equatable {
    var environments: [APNsEnvironment]

    init(_ result: borrowing DeliveryResult, sentTo requested: APNsEnvironment) {
        let movedOn = result.attempts.dropLast().contains { $0.reason == APNsErrorReason.badDeviceToken.rawValue }
        environments = movedOn ? [requested, requested.other] : [requested]
    }

    /// The environment of the final answer.
    var final: APNsEnvironment { environments[environments.count - 1] }
    var fellBack: Bool { environments.count > 1 }
}

/// A push's first attempt, which knows the client that sent it (and retries it).
typealias FirstAttempt = APNsClient.SendInProgress

/// Gathers the first attempts of one event's pushes, which end on loop threads in any order, and hands all
/// of them to the waiting event (or the callback of `beginDeliverAll`) once the last has ended.
final class FirstAttemptCollector: FirstAttemptReceiver {
    /// Who hears of the first attempts once all have ended: an event waiting in a task, or a callback.
    private enum Waiter {
        case task(UnsafeContinuation<[FirstAttempt?], Never>)
        case callback(@Sendable ([FirstAttempt?]) -> Void)
    }

    private let slots: Mutex<[FirstAttempt?]>
    private let remaining: Atomic<Int>
    private let waiter: Waiter

    convenience init(count: Int, _ continuation: UnsafeContinuation<[FirstAttempt?], Never>) {
        self.init(count: count, waiter: .task(continuation))
    }

    convenience init(count: Int, onAllEnded: @escaping @Sendable ([FirstAttempt?]) -> Void) {
        self.init(count: count, waiter: .callback(onAllEnded))
    }

    private init(count: Int, waiter: Waiter) {
        // Appended, not `Array(repeating:count:)`, which asks the runtime for the array's metadata on every
        // call (see `JSONParser.takePending`).
        var unfilled: [FirstAttempt?] = []
        unfilled.reserveCapacity(count)
        unfilled.append(contentsOf: repeatElement(nil, count: count))
        slots = Mutex(unfilled)
        remaining = Atomic(count)
        self.waiter = waiter
    }

    func firstAttemptEnded(_ progress: APNsClient.SendInProgress) { store(progress, at: progress.slot) }

    /// Each slot exactly once (nil for a push that could not be sent).
    func store(_ first: FirstAttempt?, at slot: Int) {
        slots.withLock { $0[slot] = first }
        guard remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        // Taken out, not copied: each send refers to this collector (its receiver), so slots left holding the
        // sends made a cycle that kept every send, its request and this collector alive for good (about
        // 650 bytes a push; figures: docs/performance.md).
        let firstAttempts = slots.withLock { slots in
            defer { slots = [] }
            return slots
        }
        switch waiter {
        case .task(let continuation): continuation.resume(returning: firstAttempts)
        case .callback(let onAllEnded): onAllEnded(firstAttempts)
        }
    }
}
