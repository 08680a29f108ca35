// Tells a fault of APNs, or of the path to it, from a fault of one push. When most recent attempts on a
// pool fail in ways that say nothing about the push itself (no connection, TLS failures, timeouts, 5xx,
// 429 TooManyProviderTokenUpdates), the pool's breaker opens: its pushes wait, spending no attempts,
// until a probe finds APNs answering again. Kafka holds the rest of the work meanwhile, so waiting is cheap and nothing is burnt.

public import HTTP2
import Platform
import Synchronization

/// The circuit breaker of one pool (environment × credential).
///
/// Closed: every push goes out, and each attempt's verdict is recorded. The breaker opens after
/// `consecutiveFaults` pool faults in a row, or when most answers fail: at least `faultsInWindow` faults,
/// and at least half of all answers, over the last one to two `windowDuration`s. Open: pushes wait in
/// `admit`; after `openDuration` (growing with each failed probe) it is half-open and lets one waiting
/// push through as a probe. Any answer that is not a pool fault, from the probe or from a push sent
/// earlier, closes it and releases every waiting push.
///
/// Both rules read the answers in the order the requests were sent, or as a share, never as a sequence
/// of arrivals: a server orders the answers of one write as it likes. nghttp2 sends every queued
/// HEADERS frame before any DATA frame, so a burst's 200s (HEADERS only) go first and its errors (a DATA
/// frame each, with the reason) end it together. Counted in arrival order ("5 in a row", "10 of the
/// last 20 since the first fault"), 2% of 503s at full speed held the whole pool 5 times in a 3-second
/// run. So a fault is part of a run only if no request sent after its own has been answered healthily
/// (that answer shows the pool worked after the fault's request left), and "most" counts every answer,
/// healthy ones included, as it arrives.
///
/// - Important: thread-safe. `isClosed` is one atomic load; recording a healthy verdict while no run of
///   faults is open is two loads, a store and an atomic increment, without the lock.
public final class CircuitBreaker: Sendable {
    public enum State: String, Sendable, Hashable, CustomStringConvertible {
        case closed
        case open
        case halfOpen = "half_open"

        public var description: String { rawValue }
    }

    public struct Configuration: Sendable, Hashable {
        /// Pool faults in a row that open the breaker. Default: 5.
        public var consecutiveFaults = 5
        /// The period "most answers fail" is judged over: the share is taken over the last one to two of
        /// them. Default: 1 s.
        public var windowDuration: Duration = .seconds(1)
        /// The fewest faults, over that period, that open the breaker when they are at least half of the
        /// answers ("most requests"). Default: 10.
        public var faultsInWindow = 10
        /// How long the breaker stays open before a probe: its ceiling doubles with each failed probe, up to
        /// a ceiling low enough that delivery resumes within seconds of APNs coming back, at one request per
        /// pool per probe. Default: 1 s doubling to 10 s, with jitter.
        public var openDuration = ExponentialBackoff(initial: .seconds(1), maximum: .seconds(10))
        /// A pool whose other pushes met at least `degradedFaults` faults, at least `degradedPercent` of their
        /// answers, over the same one to two `windowDuration`s is degraded: too few faults to open the
        /// breaker, too many to blame the push. Its pushes' faults then spend no attempts
        /// (`faultsAreThePools`). Defaults: 3 faults, 10 %.
        public var degradedFaults = 3
        public var degradedPercent = 10
        /// How long a pool judged degraded stays so while too few answers come to judge it again (the last
        /// pushes of a backlog retry in a pool that has gone quiet): the backoff's ceiling. Default: 30 s.
        public var degradedMemory: Duration = .seconds(30)

        public init() {}
    }

    /// What an attempt says about the pool.
    public enum Verdict: Sendable, Hashable {
        /// APNs answered, in a way that is about the push (200, 400, 410...).
        case healthy
        /// The pool or APNs is in trouble: why, for people.
        case fault(String)
        /// Says nothing about the pool (not sent, the request was invalid, cancelled).
        case neutral
    }

    /// A change of state, for logs, metrics and readiness.
    public struct Transition: Sendable {
        public var from: State
        public var to: State
        /// The fault that opened it, or what closed it.
        public var cause: String
        /// Pushes waiting at the time.
        public var waiting: Int
        /// When open: how long until the next probe.
        public var probeIn: Duration?
    }

    /// The answer of `admit`.
    public enum Admission: Sendable, Hashable {
        /// Send now; `probe` when this push is the half-open breaker's probe (record its verdict with it).
        case go(probe: Bool)
        /// The deadline passed while waiting: nothing was sent.
        case deadlinePassed
        /// The sender withdrew the push while it waited (`SendWithdrawal`): nothing was sent.
        case withdrawn
    }

    /// A snapshot for metrics.
    public struct Snapshot: Sendable, Hashable {
        public var state: State
        /// Pushes waiting for the breaker to let them through.
        public var waiting: Int
    }

    private struct Waiter {
        let id: UInt64
        let deadline: UInt64
        let withdrawal: SendWithdrawal?
        let continuation: UnsafeContinuation<Admission, Never>
    }

    /// Answers and faults counted up to a moment: "most answers fail" is judged since the older of two.
    private struct Tally {
        var time: UInt64 = 0
        var answers: UInt64 = 0
        var faults: UInt64 = 0
    }

    private struct Machine {
        var state = State.closed
        var consecutiveFaults = 0
        /// The latest send time of a fault in the current run.
        var lastFaultSentAt: UInt64 = 0
        /// Pool faults, ever; answers (healthy ones too) are counted in `answers`.
        var faults: UInt64 = 0
        var olderTally = Tally()
        var newerTally = Tally()
        var failedProbes = 0
        var reopenAt: UInt64 = 0
        var probeInFlight = false
        /// Until when the pool counts as degraded without another look (`faultsAreThePools`).
        var degradedUntil: UInt64 = 0
        var lastFault = ""
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var ticking = false
    }

    /// What to do once the lock is released.
    private struct Effects {
        var resume: [(UnsafeContinuation<Admission, Never>, Admission)] = []
        var transitions: [Transition] = []
        var startTicking = false
    }

    public let configuration: Configuration
    private let machine = Mutex(Machine())
    /// Mirrors `machine.state != .closed`, read without the lock on every send.
    private let holding = Atomic<Bool>(false)
    /// Whether a run of faults is open: healthy verdicts take the lock only then (to end it).
    private let runHasFault = Atomic<Bool>(false)
    /// Healthy and fault verdicts, ever, counted as they arrive.
    private let answers = Atomic<UInt64>(0)
    /// The latest send time (MonotonicClock nanoseconds) of a request answered healthily: a fault of a
    /// request sent before it says nothing about the pool.
    private let healthySentAt = Atomic<UInt64>(0)
    private let onTransition: @Sendable (Transition) -> Void
    /// How often waiting pushes are checked against their deadlines and withdrawals, and an open breaker
    /// against its probe time.
    private static let tickNanoseconds: UInt64 = 100_000_000

    public init(
        configuration: Configuration = Configuration(),
        onTransition: @escaping @Sendable (Transition) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.onTransition = onTransition
    }

    /// True while pushes may go out without waiting.
    public var isClosed: Bool { !holding.load(ordering: .relaxed) }

    public var snapshot: Snapshot {
        machine.withLock { Snapshot(state: $0.state, waiting: $0.waiters.count) }
    }

    /// Records what an attempt said about the pool. `probe`: the attempt was let through by `.go(probe: true)`.
    /// `sentAt`: when the attempt's request was sent (MonotonicClock nanoseconds); nil: now.
    public func record(_ verdict: Verdict, probe: Bool = false, sentAt: UInt64? = nil) {
        switch verdict {
        case .healthy:
            answers.wrappingAdd(1, ordering: .relaxed)
            noteHealthy(sentAt: sentAt ?? MonotonicClock.now())
            if !probe, !runHasFault.load(ordering: .relaxed), !holding.load(ordering: .relaxed) { return }
        case .fault:
            answers.wrappingAdd(1, ordering: .relaxed)
        case .neutral:
            break
        }
        let now = MonotonicClock.now()
        let sent = sentAt ?? now
        // A fault of a request sent before one that was answered healthily came, in send order, before
        // that answer: it is no part of a run of faults (it still counts in the share of answers).
        let isLatest = sent >= healthySentAt.load(ordering: .relaxed)
        let effects = machine.withLock { machine -> Effects in
            var effects = Effects()
            switch verdict {
            case .healthy:
                switch machine.state {
                case .closed:
                    // In send order, an answer to a request sent before the run's latest fault came
                    // before that fault: it ends no run.
                    if sent >= machine.lastFaultSentAt { endRun(&machine) }
                case .open, .halfOpen:
                    close(&machine, cause: "APNs answered again", effects: &effects)
                }
            case .fault(let cause):
                machine.lastFault = cause
                machine.faults += 1
                switch machine.state {
                case .closed:
                    if isLatest {
                        machine.lastFaultSentAt = max(machine.lastFaultSentAt, sent)
                        machine.consecutiveFaults += 1
                        runHasFault.store(true, ordering: .relaxed)
                    }
                    if machine.consecutiveFaults >= configuration.consecutiveFaults
                        || mostAnswersFail(&machine, now: now)
                    {
                        open(&machine, now: now, cause: cause, effects: &effects)
                    }
                case .halfOpen where probe:
                    machine.probeInFlight = false
                    machine.failedProbes += 1
                    open(&machine, now: now, cause: cause, effects: &effects)
                case .open, .halfOpen:
                    break  // an attempt sent before the breaker opened: it knows no more than the breaker does
                }
            case .neutral:
                if probe, machine.state == .halfOpen {
                    machine.probeInFlight = false
                    admitProbe(&machine, now: now, effects: &effects)
                }
            }
            return effects
        }
        perform(effects)
    }

    /// Whether a fault a push just met is its pool's rather than its own, with the breaker closed: whether
    /// the pool is degraded (`Configuration.degradedFaults`, `degradedPercent`) leaving out the push's own
    /// `ownFaults` faults of the last window or two. APNs answering 503 to a third of all requests, or one
    /// connection of several landing on a front end that fails everything, stays under the breaker's
    /// thresholds; counted as the push's attempts, such faults failed a push now and then (p^5 of them at
    /// a fault share p: 0.3 % at 30 %) although Apple never said no to it. A push that fails where the
    /// others do not (a pool with few other faults, or none) is judged on its own attempts.
    /// A pool judged degraded stays so for `degradedMemory` while too few answers come to judge it again.
    public func faultsAreThePools(ownFaults: Int) -> Bool {
        let now = MonotonicClock.now()
        return machine.withLock { machine in
            rollTallies(&machine, now: now)
            let own = UInt64(max(0, ownFaults))
            let faults = machine.faults &- machine.olderTally.faults
            let all = answers.load(ordering: .relaxed) &- machine.olderTally.answers
            let othersFaults = faults > own ? faults - own : 0
            let othersAnswers = all > own ? all - own : 0
            let percent = UInt64(configuration.degradedPercent)
            if othersFaults >= UInt64(configuration.degradedFaults), othersFaults * 100 >= othersAnswers * percent {
                machine.degradedUntil = now &+ configuration.degradedMemory.nanosecondsClamped
                return true
            }
            // Enough answers that the faults would have shown: the pool is well again.
            if othersAnswers * percent >= UInt64(configuration.degradedFaults) * 100 { machine.degradedUntil = 0 }
            return now < machine.degradedUntil
        }
    }

    /// Returns at once while the breaker is closed; otherwise waits until the push may go (a probe, or
    /// the breaker closed), `deadline` (MonotonicClock nanoseconds) passes, or `withdrawal` is withdrawn.
    public func admit(deadline: UInt64, withdrawal: SendWithdrawal? = nil) async -> Admission {
        if isClosed { return .go(probe: false) }
        return await withUnsafeContinuation { continuation in
            let now = MonotonicClock.now()
            let effects = machine.withLock { machine -> Effects in
                var effects = Effects()
                switch machine.state {
                case .closed:
                    effects.resume.append((continuation, .go(probe: false)))
                case .halfOpen where !machine.probeInFlight && machine.waiters.isEmpty:
                    machine.probeInFlight = true
                    effects.resume.append((continuation, .go(probe: true)))
                case .open, .halfOpen:
                    if deadline <= now {
                        effects.resume.append((continuation, .deadlinePassed))
                    } else if withdrawal?.isWithdrawn == true {
                        effects.resume.append((continuation, .withdrawn))
                    } else {
                        machine.nextWaiterID += 1
                        machine.waiters.append(
                            Waiter(
                                id: machine.nextWaiterID, deadline: deadline, withdrawal: withdrawal,
                                continuation: continuation))
                        ensureTicking(&machine, effects: &effects)
                    }
                }
                return effects
            }
            perform(effects)
        }
    }

    /// Moves `healthySentAt` up to `sentAt`: a load and a plain store per answer, no read-modify-write on
    /// every response. Two loops racing may leave the earlier of two close send times for a moment, until
    /// the next answer; a fault sent in those microseconds would count.
    private func noteHealthy(sentAt: UInt64) {
        if sentAt > healthySentAt.load(ordering: .relaxed) { healthySentAt.store(sentAt, ordering: .relaxed) }
    }

    // MARK: State changes (under the lock)

    private func open(_ machine: inout Machine, now: UInt64, cause: String, effects: inout Effects) {
        let from = machine.state
        let wait = configuration.openDuration.delay(afterFailures: machine.failedProbes + 1)
        let floor = Duration.milliseconds(Int64(configuration.openDuration.initial.seconds * 500))
        let probeIn = max(wait, floor)
        machine.state = .open
        machine.reopenAt = now &+ probeIn.nanosecondsClamped
        machine.probeInFlight = false
        endRun(&machine)
        holding.store(true, ordering: .relaxed)
        // Reopening after a failed probe is no news to an operator beyond the first opening.
        if from == .closed {
            effects.transitions.append(
                Transition(
                    from: from, to: .open, cause: cause,
                    waiting: machine.waiters.count, probeIn: probeIn))
        }
        ensureTicking(&machine, effects: &effects)
    }

    private func close(_ machine: inout Machine, cause: String, effects: inout Effects) {
        let from = machine.state
        machine.state = .closed
        machine.failedProbes = 0
        machine.probeInFlight = false
        endRun(&machine)
        holding.store(false, ordering: .relaxed)
        effects.transitions.append(
            Transition(
                from: from, to: .closed, cause: cause,
                waiting: machine.waiters.count, probeIn: nil))
        for waiter in machine.waiters { effects.resume.append((waiter.continuation, .go(probe: false))) }
        machine.waiters.removeAll()
    }

    private func endRun(_ machine: inout Machine) {
        machine.consecutiveFaults = 0
        machine.lastFaultSentAt = 0
        runHasFault.store(false, ordering: .relaxed)
    }

    /// Whether at least `faultsInWindow` faults, and at least half of all answers, came since the older
    /// tally, which is one to two `windowDuration`s old: never less than one period, so the healthy
    /// answers read just before a burst's errors are counted with them. Answers keep being counted
    /// while the breaker is open, so after a probe closes it, a pool that still fails most requests
    /// opens again at its next fault, before the released pushes spend their attempts.
    private func mostAnswersFail(_ machine: inout Machine, now: UInt64) -> Bool {
        let answered = rollTallies(&machine, now: now)
        let faults = machine.faults &- machine.olderTally.faults
        let all = answered &- machine.olderTally.answers
        return faults >= UInt64(configuration.faultsInWindow) && faults * 2 >= all
    }

    /// Starts a new tally when the newer one is a `windowDuration` old; returns the answers counted now.
    @discardableResult
    private func rollTallies(_ machine: inout Machine, now: UInt64) -> UInt64 {
        let answered = answers.load(ordering: .relaxed)
        // `now` was read before the lock: another thread's tally may be a little newer.
        if now >= machine.newerTally.time,
            now - machine.newerTally.time >= configuration.windowDuration.nanosecondsClamped
        {
            machine.olderTally = machine.newerTally
            machine.newerTally = Tally(time: now, answers: answered, faults: machine.faults)
        }
        return answered
    }

    /// Lets the oldest waiting push through as the probe, when half-open and no probe is out.
    private func admitProbe(_ machine: inout Machine, now: UInt64, effects: inout Effects) {
        guard machine.state == .halfOpen, !machine.probeInFlight else { return }
        while !machine.waiters.isEmpty {
            let waiter = machine.waiters.removeFirst()
            if waiter.deadline <= now {
                effects.resume.append((waiter.continuation, .deadlinePassed))
                continue
            }
            machine.probeInFlight = true
            effects.resume.append((waiter.continuation, .go(probe: true)))
            return
        }
    }

    private func ensureTicking(_ machine: inout Machine, effects: inout Effects) {
        if !machine.ticking {
            machine.ticking = true
            effects.startTicking = true
        }
    }

    /// Half-opens a breaker whose open time is over, lets a probe out, and ends the waits whose deadline
    /// passed. Returns whether the ticker is still needed.
    private func tick() -> Bool {
        let now = MonotonicClock.now()
        var keepTicking = false
        let effects = machine.withLock { machine -> Effects in
            var effects = Effects()
            if machine.state == .open, now >= machine.reopenAt {
                machine.state = .halfOpen
                if machine.failedProbes == 0 {
                    effects.transitions.append(
                        Transition(
                            from: .open, to: .halfOpen,
                            cause: "probing after \(machine.lastFault)", waiting: machine.waiters.count, probeIn: nil))
                }
            }
            machine.waiters.removeAll { waiter in
                if waiter.deadline <= now {
                    effects.resume.append((waiter.continuation, .deadlinePassed))
                    return true
                }
                guard waiter.withdrawal?.isWithdrawn == true else { return false }
                effects.resume.append((waiter.continuation, .withdrawn))
                return true
            }
            admitProbe(&machine, now: now, effects: &effects)
            keepTicking = machine.state == .open || !machine.waiters.isEmpty
            if !keepTicking { machine.ticking = false }
            return effects
        }
        perform(effects)
        return keepTicking
    }

    private func perform(_ effects: Effects) {
        for transition in effects.transitions { onTransition(transition) }
        for (continuation, admission) in effects.resume { continuation.resume(returning: admission) }
        if effects.startTicking {
            Task { [self] in
                repeat {
                    try? await Task.sleep(nanoseconds: Self.tickNanoseconds)
                } while tick()
            }
        }
    }
}

extension CircuitBreaker.Verdict {
    /// What an attempt's outcome says about its pool.
    public init(_ outcome: AttemptOutcome) {
        switch outcome {
        case .response(let response, _):
            if response.isAccepted {
                self = .healthy
                return
            }
            // TooManyRequests is about one device ("too many requests ... to the same device token"): the
            // client paces that device (DeviceThrottle), and a burst to one busy device must not stop
            // every other device's pushes.
            if response.reason == .tooManyRequests {
                self = .neutral
                return
            }
            switch response.reasonClass ?? .permanent {
            case .retryWithBackoff:
                self = .fault("APNs answered \(response.status) \(response.reason?.rawValue ?? "(no reason)")")
            default:
                self = .healthy
            }
        case .transportFailure(let error):
            switch error.code {
            case .unprocessed, .poolSaturated, .poolShutDown, .invalidConfiguration, .responseTooLarge:
                self = .neutral
            default:
                self = .fault("\(error.code): \(error.message)")
            }
        case .credentialFailure, .invalidRequest, .cancelled:
            self = .neutral
        }
    }
}
