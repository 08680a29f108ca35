// The simulator's logic, shared by all connections: per request it applies faults, validates like
// APNs, checks device state, records what it accepted and counts what it answered.

import APNs
import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The per-connection facts the engine keeps between requests; owned by the connection's thread.
struct ConnectionContext: Sendable {
    let id: Int
    var random: SimulatorRandom
    /// Streams planned so far on this connection.
    var streamOrdinal = 0
    var authentication = ConnectionAuthentication()
    var faults = FaultSnapshot()
    /// A refused provider token lowered this connection's stream limit (`streamLimitAfterRefusedToken`).
    var throttledByRefusedToken = false
    /// Counted on this connection's thread since its last report to the engine (`report`).
    var tally = LedgerTally()
}

/// - Important: thread-safe; every connection thread calls into it.
final class SimulatorEngine: Sendable {
    let seed: UInt64
    let faults: FaultInjector
    let validator: RequestValidator
    let includeUniqueID: Bool
    /// Whether accepted notifications are kept at all (`acceptedCapacity` > 0); benchmarks turn it off.
    let keepsAccepted: Bool
    private let ledger: Mutex<SimulatorLedger>
    private let deviceRequests = DeviceRequestCounter()

    init(configuration: SimulatorConfiguration, validator: RequestValidator) {
        seed = configuration.seed
        faults = FaultInjector(configuration.faults)
        self.validator = validator
        includeUniqueID = configuration.environment == .sandbox
        keepsAccepted = configuration.acceptedCapacity > 0
        ledger = Mutex(SimulatorLedger(capacity: configuration.acceptedCapacity))
    }

    /// Decides what a complete request gets.
    func plan(_ request: IncomingRequest, streamID: Int32, context: inout ConnectionContext) -> StreamPlan {
        context.streamOrdinal += 1
        let decision = faults.decide(
            streamOrdinal: context.streamOrdinal, cache: &context.faults, random: &context.random)
        var plan = StreamPlan(answer: .stall)
        plan.delayNanoseconds = decision.delayNanoseconds
        plan.newMaxConcurrentStreams = decision.newMaxConcurrentStreams
        if decision.goAwayAfterThisStream { plan.goAway = .includingThisStream }

        switch decision.outcome {
        case .dropConnection:
            plan.dropConnection = true
            context.tally.requests += 1
            context.tally.drops += 1
            return plan
        case .goAwayBeforeThisStream:
            plan.goAway = .beforeThisStream
            plan.answer = .unprocessed
            context.tally.requests += 1
            context.tally.unprocessed += 1
            return plan
        case .stall:
            context.tally.requests += 1
            context.tally.stalls += 1
            return plan
        case .fail(let failure):
            let response = SimulatorResponse(
                status: failure.status, apnsID: echoedOrNewID(request, &context.random), reason: failure.reason,
                retryAfterSeconds: failure.retryAfterSeconds)
            context.tally.count(ResponseKind(status: failure.status, reason: failure.reason))
            plan.answer = .respond(response)
            return plan
        case .process:
            break
        }

        let now = WallClockTime.milliseconds()
        if let path = request.path, path.hasPrefix(RequestValidator.managementPathPrefix) {
            let answer = validator.answerChannelManagement(
                request, connection: &context.authentication, now: now / 1000)
            var response = SimulatorResponse(
                status: answer.status, apnsID: answer.requestID ?? newID(&context.random),
                reason: answer.reason?.rawValue, idHeaderName: "apns-request-id", successBody: answer.body)
            if let channel = answer.channelID { response.extraHeaders = [APNsHeaderField("apns-channel-id", channel)] }
            context.tally.count(ResponseKind(status: answer.status, reason: answer.reason?.rawValue))
            plan.answer = .respond(response)
            return plan
        }
        // A broadcast's id travels in apns-request-id, both ways.
        let idHeaderName =
            request.path?.hasPrefix(RequestValidator.broadcastPathPrefix) == true ? "apns-request-id" : "apns-id"
        switch validator.validate(request, connection: &context.authentication, now: now / 1000) {
        case .rejected(let reason, let apnsID, let timestamp):
            let status = reason.httpStatus ?? 400
            let response = SimulatorResponse(
                status: status, apnsID: apnsID ?? newID(&context.random), reason: reason.rawValue,
                timestampMilliseconds: timestamp, idHeaderName: idHeaderName)
            context.tally.count(ResponseKind(status: status, reason: reason.rawValue))
            plan.answer = .respond(response)
            if let throttled = context.faults.faults.streamLimitAfterRefusedToken,
                [.invalidProviderToken, .expiredProviderToken, .missingProviderToken].contains(reason)
            {
                plan.newMaxConcurrentStreams = throttled
                context.throttledByRefusedToken = true
            }
        case .accepted(let accepted):
            if context.throttledByRefusedToken {
                context.throttledByRefusedToken = false
                plan.newMaxConcurrentStreams =
                    plan.newMaxConcurrentStreams ?? context.faults.faults.maxConcurrentStreams
            }
            if let limit = context.faults.faults.deviceLimit, !accepted.deviceToken.isEmpty,
                deviceRequests.countIsOverLimit(accepted.deviceToken, limit: limit, now: now)
            {
                let reason = APNsErrorReason.tooManyRequests.rawValue
                context.tally.count(ResponseKind(status: 429, reason: reason))
                plan.answer = .respond(
                    SimulatorResponse(
                        status: 429, apnsID: accepted.apnsID ?? newID(&context.random), reason: reason,
                        idHeaderName: idHeaderName))
                return plan
            }
            let apnsID = accepted.apnsID ?? newID(&context.random)
            let uniqueID = includeUniqueID ? context.random.uuidString() : nil
            if keepsAccepted {
                let record = AcceptedNotification(
                    connectionID: context.id, streamID: Int(streamID), deviceToken: accepted.deviceToken,
                    channelID: accepted.channelID, apnsID: apnsID, uniqueID: uniqueID, pushType: accepted.pushType,
                    topic: accepted.topic,
                    keyID: accepted.keyID,
                    headers: request.hasAuthorization
                        ? request.headers.filter { $0.name != "authorization" } : request.headers,
                    payload: request.body, receivedAtMilliseconds: now)
                context.tally.accept(record)
            } else {
                // Nothing is kept, so no record is made: counted as one the ring dropped.
                context.tally.acceptUnkept()
            }
            plan.answer = .respond(
                SimulatorResponse(status: 200, apnsID: apnsID, uniqueID: uniqueID, idHeaderName: idHeaderName))
        }
        return plan
    }

    private func echoedOrNewID(_ request: IncomingRequest, _ random: inout SimulatorRandom) -> String {
        if let id = request.header("apns-id"), (try? APNsID(parsing: id)) != nil { return id }
        return newID(&random)
    }

    /// APNs makes up ids in upper case; clients must compare ids without regard to case.
    private func newID(_ random: inout SimulatorRandom) -> String { random.uuidString().uppercased() }

    // MARK: - Faults

    func currentFaults() -> (SimulatorFaults, UInt64) { faults.current() }
    func currentFaults(ifNewerThan generation: UInt64) -> (SimulatorFaults, UInt64)? {
        faults.current(ifNewerThan: generation)
    }

    // MARK: - Counters

    func connectionAccepted(refused: Bool) {
        ledger.withLock { ledger in
            ledger.connectionAccepted()
            if refused { ledger.connectionRefused() }
        }
    }

    /// Adds what a connection counted since its last report to the stats, in one locked step: a
    /// connection reports once per read of its socket rather than once per request, since 16 connection
    /// threads taking this lock per request on 2 cores spun on it (about one `bench pipeline` run in
    /// eight spent a third of the simulator's CPU there, docs/performance.md). The connection reports
    /// before it writes the answers, so no client sees an answer the stats do not count yet.
    func report(_ context: inout ConnectionContext) {
        guard !context.tally.isEmpty else { return }
        let tally = context.tally
        context.tally = LedgerTally()
        // The records pushed out of the full ring are released after the lock, not under it.
        let pushedOut = ledger.withLock { $0.add(tally, connection: context.id) }
        _ = pushedOut
    }

    func connectionEstablished(id: Int) { ledger.withLock { $0.connectionOpened() } }
    func connectionClosed(id: Int, wasEstablished: Bool) {
        ledger.withLock { $0.connectionClosed(wasOpen: wasEstablished) }
    }
    func handshakeFailed(reason: String) { ledger.withLock { $0.handshakeFailed(reason: reason) } }
    func goAwaySent() { ledger.withLock { $0.countGoAway() } }

    var stats: SimulatorStats { ledger.withLock { $0.stats } }
    var accepted: [AcceptedNotification] { ledger.withLock { $0.accepted } }
    func clearAccepted() { ledger.withLock { $0.clearAccepted() } }
}
