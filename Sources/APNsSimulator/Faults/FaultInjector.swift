// Decides, per request, which faults apply: scripted actions for the Nth request or stream first,
// then the rates. Holds the current faults behind a lock so `setFaults` can change them at any time.

import Synchronization

/// The faults that apply to one request.
struct FaultDecision: Sendable, Equatable {
    /// What happens instead of normal processing.
    enum Outcome: Sendable, Equatable {
        case process
        case fail(InjectedFailure)
        case stall
        case dropConnection
        /// GOAWAY with last-stream-id before this stream: it stays unprocessed.
        case goAwayBeforeThisStream
    }
    var outcome: Outcome = .process
    /// GOAWAY with last-stream-id = this stream, after answering it.
    var goAwayAfterThisStream = false
    var delayNanoseconds: UInt64 = 0
    var newMaxConcurrentStreams: UInt32?
}

/// A connection's copy of the faults, refreshed when `setFaults` changes them, so deciding takes no lock.
struct FaultSnapshot: Sendable {
    fileprivate(set) var generation: UInt64 = .max
    fileprivate(set) var faults = SimulatorFaults()
    fileprivate var byRequest: [Int: [FaultAction]] = [:]
    fileprivate var byStream: [Int: [FaultAction]] = [:]
    fileprivate var hasRates = false

    init() {}

    fileprivate init(_ faults: SimulatorFaults, generation: UInt64) {
        self.generation = generation
        self.faults = faults
        for entry in faults.script {
            switch entry.trigger {
            case .request(let n): byRequest[n, default: []].append(entry.action)
            case .stream(let n): byStream[n, default: []].append(entry.action)
            }
        }
        hasRates = faults.failureRate > 0 || faults.stallRate > 0 || faults.dropConnectionRate > 0
    }
}

/// Holds the faults and counts requests for the script.
/// - Important: thread-safe; `decide` is called from every connection thread.
final class FaultInjector: Sendable {
    private let snapshot: Mutex<FaultSnapshot>
    private let generation = Atomic<UInt64>(0)
    private let requestsSinceSet = Atomic<Int>(0)

    init(_ faults: SimulatorFaults) {
        snapshot = Mutex(FaultSnapshot(faults, generation: 0))
    }

    /// Replaces the faults; the request count for `.request(n)` triggers starts again at 0.
    func setFaults(_ faults: SimulatorFaults) {
        snapshot.withLock { snapshot in
            let next = snapshot.generation + 1
            snapshot = FaultSnapshot(faults, generation: next)
            requestsSinceSet.store(0, ordering: .relaxed)
            generation.store(next, ordering: .releasing)
        }
    }

    /// The current faults and their generation (incremented by every `setFaults`).
    func current() -> (SimulatorFaults, UInt64) {
        snapshot.withLock { ($0.faults, $0.generation) }
    }

    /// The current faults if they changed since `generation`.
    func current(ifNewerThan generation: UInt64) -> (SimulatorFaults, UInt64)? {
        guard self.generation.load(ordering: .acquiring) != generation else { return nil }
        return current()
    }

    /// The faults for a request: the `streamOrdinal`th stream (1-based) of its connection.
    /// `cache` is the connection's snapshot, refreshed here when the faults changed.
    func decide(streamOrdinal: Int, cache: inout FaultSnapshot, random: inout SimulatorRandom) -> FaultDecision {
        if cache.generation != generation.load(ordering: .acquiring) {
            cache = snapshot.withLock { $0 }
        }
        var actions: [FaultAction] = []
        if !cache.byRequest.isEmpty {
            let ordinal = requestsSinceSet.wrappingAdd(1, ordering: .relaxed).newValue
            if let scripted = cache.byRequest[ordinal] { actions += scripted }
        }
        if let perStream = cache.byStream[streamOrdinal] { actions += perStream }
        let faults = cache.faults

        var decision = FaultDecision()
        var extraMilliseconds = 0
        for action in actions {
            switch action {
            case .fail(let failure): decision.outcome = .fail(failure)
            case .stall: decision.outcome = .stall
            case .dropConnection: decision.outcome = .dropConnection
            case .goAway(let processThisStream):
                if processThisStream {
                    decision.goAwayAfterThisStream = true
                } else {
                    decision.outcome = .goAwayBeforeThisStream
                }
            case .delay(let milliseconds): extraMilliseconds += milliseconds
            case .setMaxConcurrentStreams(let maximum): decision.newMaxConcurrentStreams = maximum
            }
        }
        if decision.outcome == .process && cache.hasRates {
            let draw = random.unit()
            if draw < faults.failureRate {
                decision.outcome = .fail(faults.failure)
            } else if draw < faults.failureRate + faults.stallRate {
                decision.outcome = .stall
            } else if draw < faults.failureRate + faults.stallRate + faults.dropConnectionRate {
                decision.outcome = .dropConnection
            }
        }
        if let goAwayAfter = faults.goAwayAfterStreams, streamOrdinal == goAwayAfter {
            decision.goAwayAfterThisStream = true
        }
        var milliseconds = Double(extraMilliseconds)
        if !faults.latency.isZero { milliseconds += faults.latency.sampleMilliseconds { random.unit() } }
        decision.delayNanoseconds = UInt64(max(0, milliseconds) * 1_000_000)
        return decision
    }
}
