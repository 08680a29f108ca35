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

/// Holds the faults and counts requests for the script.
/// - Important: thread-safe; `decide` is called from every connection thread.
final class FaultInjector: Sendable {
    private struct State {
        var faults: SimulatorFaults
        var generation: UInt64 = 0
        var requestsSinceSet = 0
        var byRequest: [Int: [FaultAction]] = [:]
        var byStream: [Int: [FaultAction]] = [:]

        init(_ faults: SimulatorFaults) {
            self.faults = faults
            for entry in faults.script {
                switch entry.trigger {
                case .request(let n): byRequest[n, default: []].append(entry.action)
                case .stream(let n): byStream[n, default: []].append(entry.action)
                }
            }
        }
    }

    private let state: Mutex<State>

    init(_ faults: SimulatorFaults) {
        state = Mutex(State(faults))
    }

    /// Replaces the faults; the request count for `.request(n)` triggers starts again at 0.
    func setFaults(_ faults: SimulatorFaults) {
        state.withLock { state in
            let generation = state.generation + 1
            state = State(faults)
            state.generation = generation
        }
    }

    /// The current faults and their generation (incremented by every `setFaults`).
    func current() -> (SimulatorFaults, UInt64) {
        state.withLock { ($0.faults, $0.generation) }
    }

    /// The current faults if they changed since `generation`.
    func current(ifNewerThan generation: UInt64) -> (SimulatorFaults, UInt64)? {
        state.withLock { $0.generation == generation ? nil : ($0.faults, $0.generation) }
    }

    /// The faults for a request: the `streamOrdinal`th stream (1-based) of its connection.
    func decide(streamOrdinal: Int, random: inout SimulatorRandom) -> FaultDecision {
        let (actions, failureRate, stallRate, dropRate, failure, latency, goAwayAfter) = state.withLock { state in
            state.requestsSinceSet += 1
            var actions = state.byRequest[state.requestsSinceSet] ?? []
            if let perStream = state.byStream[streamOrdinal] { actions += perStream }
            let faults = state.faults
            return (actions, faults.failureRate, faults.stallRate, faults.dropConnectionRate,
                faults.failure, faults.latency, faults.goAwayAfterStreams)
        }
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
        if decision.outcome == .process && failureRate + stallRate + dropRate > 0 {
            let draw = random.unit()
            if draw < failureRate {
                decision.outcome = .fail(failure)
            } else if draw < failureRate + stallRate {
                decision.outcome = .stall
            } else if draw < failureRate + stallRate + dropRate {
                decision.outcome = .dropConnection
            }
        }
        if let goAwayAfter, streamOrdinal == goAwayAfter { decision.goAwayAfterThisStream = true }
        var milliseconds = Double(extraMilliseconds)
        if !latency.isZero { milliseconds += latency.sampleMilliseconds { random.unit() } }
        decision.delayNanoseconds = UInt64(max(0, milliseconds) * 1_000_000)
        return decision
    }
}
