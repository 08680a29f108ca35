// The breaker's state machine on its own: when it opens, how waiting pushes are held and let through,
// what a probe decides, and which outcomes count as faults of the pool.

import Glibc
import HTTP2
import Platform
import Synchronization
import TestSupport
import Testing

@testable import APNs

@Suite("APNs pool circuit breaker")
struct CircuitBreakerTests {
    /// Transitions as the breaker reported them.
    final class Transitions: Sendable {
        private let seen = Mutex<[CircuitBreaker.Transition]>([])
        var all: [(CircuitBreaker.State, CircuitBreaker.State)] { seen.withLock { $0.map { ($0.from, $0.to) } } }
        var causes: [String] { seen.withLock { $0.map(\.cause) } }
        func record(_ transition: CircuitBreaker.Transition) { seen.withLock { $0.append(transition) } }
    }

    static func quickBreaker(_ transitions: Transitions) -> CircuitBreaker {
        var configuration = CircuitBreaker.Configuration()
        configuration.openDuration = ExponentialBackoff(initial: .milliseconds(40), maximum: .milliseconds(80))
        return CircuitBreaker(configuration: configuration) { transitions.record($0) }
    }

    static let farAway = MonotonicClock.now() &+ 60_000_000_000

    @Test func healthyAnswersAndIsolatedFaultsKeepItClosed() {
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        for _ in 0..<1000 { breaker.record(.healthy) }
        for _ in 0..<4 {
            for _ in 0..<4 { breaker.record(.fault("503 ServiceUnavailable")) }
            breaker.record(.healthy)
            for _ in 0..<6 { breaker.record(.healthy) }
        }
        #expect(breaker.isClosed, "4 faults in a row, then answers: never 5 in a row nor 10 of 20")
        #expect(transitions.all.isEmpty)
        for _ in 0..<50 { breaker.record(.neutral) }
        #expect(breaker.isClosed, "unsent requests say nothing about the pool")
    }

    @Test func aPoolWhoseOtherPushesFailTooIsToBlameForAPushsFault() {
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        // A healthy pool: one push's fault is its own.
        for _ in 0..<200 { breaker.record(.healthy) }
        breaker.record(.fault("500 InternalServerError"))
        #expect(!breaker.faultsAreThePools(ownFaults: 1), "the pool answers everyone else")
        // The push failing alone, again and again, in a pool that answers others: still its own.
        for _ in 0..<4 { breaker.record(.fault("500 InternalServerError")) }
        for _ in 0..<20 { breaker.record(.healthy) }
        #expect(!breaker.faultsAreThePools(ownFaults: 5), "its own five faults do not make the pool degraded")
        // A third of everyone's answers are 503, interleaved so that the breaker stays closed.
        for _ in 0..<30 {
            breaker.record(.fault("503 ServiceUnavailable"))
            breaker.record(.healthy)
            breaker.record(.healthy)
        }
        #expect(breaker.isClosed, "a third of faults, never five in a row: under the breaker's thresholds")
        #expect(breaker.faultsAreThePools(ownFaults: 1), "the pool fails others too: the fault is the pool's")
        // The pool goes quiet (the backlog's last pushes retry alone): still degraded, for a while.
        var configuration = CircuitBreaker.Configuration()
        configuration.windowDuration = .milliseconds(20)
        configuration.degradedMemory = .seconds(600)
        let quieting = CircuitBreaker(configuration: configuration)
        for _ in 0..<30 {
            quieting.record(.fault("503 ServiceUnavailable"))
            quieting.record(.healthy)
        }
        #expect(quieting.faultsAreThePools(ownFaults: 1))
        // Windows pass with only this push's faults: the burst leaves the window (its tallies move on at
        // answers a window apart), and nothing is left to judge the pool by.
        for _ in 0..<2 {
            usleep(30_000)
            quieting.record(.fault("503 ServiceUnavailable"))
        }
        #expect(quieting.faultsAreThePools(ownFaults: 1), "no answers to judge it by: it stays degraded")
        // Well again: many answers, few faults.
        usleep(30_000)
        for _ in 0..<100 { quieting.record(.healthy) }
        quieting.record(.fault("503 ServiceUnavailable"))
        #expect(!quieting.faultsAreThePools(ownFaults: 1), "answered healthily, the pool is well again")
        // Few faults among many answers (2 %): the push is judged on its own attempts.
        let quiet = Self.quickBreaker(transitions)
        for _ in 0..<10 {
            quiet.record(.fault("503 ServiceUnavailable"))
            for _ in 0..<49 { quiet.record(.healthy) }
        }
        #expect(!quiet.faultsAreThePools(ownFaults: 1))
    }

    @Test func fiveFaultsInARowOpenIt() {
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        for _ in 0..<4 { breaker.record(.fault("connectFailed: refused")) }
        #expect(breaker.isClosed)
        breaker.record(.fault("connectFailed: refused"))
        #expect(!breaker.isClosed)
        #expect(transitions.all.map { "\($0.0)>\($0.1)" } == ["closed>open"])
        #expect(transitions.causes == ["connectFailed: refused"])
        #expect(breaker.snapshot.state == .open)
    }

    @Test func halfOfTheWindowFailingOpensIt() {
        let breaker = Self.quickBreaker(Transitions())
        // Alternating: never two faults in a row, but half of every 20 verdicts.
        for index in 0..<19 { breaker.record(index % 2 == 1 ? .fault("503") : .healthy) }
        #expect(breaker.isClosed, "9 faults, never two in a row")
        breaker.record(.fault("503"))
        #expect(!breaker.isClosed, "10 of the last 20")
    }

    static let microsecond: UInt64 = 1_000

    @Test func errorsAnsweredAfterLaterRequestsAreThosePushesFaultsNotThePools() {
        // One write's answers as nghttp2 orders them: requests sent a microsecond apart, the 200s first,
        // then the errors together. 20 errors "in a row" by arrival, none by send order.
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        let start: UInt64 = 1_000_000_000_000
        for burst in 0..<10 {
            let sent = (0..<100).map { start + UInt64(burst * 100 + $0) * Self.microsecond }
            let failing = Set(stride(from: 3, to: 100, by: 5))  // 20 of the 100
            for index in sent.indices where !failing.contains(index) { breaker.record(.healthy, sentAt: sent[index]) }
            for index in failing.sorted() { breaker.record(.fault("503 ServiceUnavailable"), sentAt: sent[index]) }
        }
        #expect(breaker.isClosed)
        #expect(transitions.all.isEmpty)
        // Then everything sent after the last answered request fails: that is the pool.
        let outage = start + 2_000 * Self.microsecond
        for index in 0..<4 { breaker.record(.fault("503 ServiceUnavailable"), sentAt: outage + UInt64(index)) }
        #expect(breaker.isClosed)
        breaker.record(.fault("503 ServiceUnavailable"), sentAt: outage + 4)
        #expect(!breaker.isClosed, "5 faults of requests sent after every answered one")
    }

    @Test func mostAnswersFailingOpensItWhateverTheOrderAndAFewPercentNever() {
        let start: UInt64 = 1_000_000_000_000
        /// One write of `size` answers to requests sent a microsecond apart, every `failEvery`th failing:
        /// the 200s first, then the errors together, as nghttp2 orders them.
        func burst(_ breaker: CircuitBreaker, _ number: Int, size: Int, failEvery: Int) {
            let sent = (0..<size).map { start + UInt64(number * size + $0) * Self.microsecond }
            let failing = Set(stride(from: 0, to: size, by: failEvery))
            for index in sent.indices where !failing.contains(index) { breaker.record(.healthy, sentAt: sent[index]) }
            for index in failing.sorted() { breaker.record(.fault("503 ServiceUnavailable"), sentAt: sent[index]) }
        }
        // 2%: each write's 10 errors in a row, after its 490 answers.
        let few = Self.quickBreaker(Transitions())
        for number in 0..<20 { burst(few, number, size: 500, failEvery: 50) }
        #expect(few.isClosed, "10 errors in a row by arrival, 2% of the answers")
        // Two of every three fail: the errors of each write come after requests sent later were answered,
        // so they make no run, but they are most of the answers.
        let most = Self.quickBreaker(Transitions())
        burst(most, 0, size: 30, failEvery: 3)
        #expect(most.isClosed, "a third failing")
        let mostFailing = Self.quickBreaker(Transitions())
        let sent = (0..<30).map { start + UInt64($0) * Self.microsecond }
        for index in sent.indices where index % 3 == 0 { mostFailing.record(.healthy, sentAt: sent[index]) }
        for index in sent.indices where index % 3 != 0 && index < 27 {
            mostFailing.record(.fault("503 ServiceUnavailable"), sentAt: sent[index])
        }
        #expect(!mostFailing.isClosed, "two thirds failing, none of them after the last answered request")
    }

    @Test func aFaultSentAfterTheLastAnsweredRequestCountsWhateverArrivesMeanwhile() {
        let breaker = Self.quickBreaker(Transitions())
        let start: UInt64 = 1_000_000_000_000
        breaker.record(.healthy, sentAt: start)
        // Faults sent after `start`, and answers to requests sent before it: the answers prove nothing
        // about the pool after `start`, so the run goes on.
        for index in 1...4 {
            breaker.record(.fault("503"), sentAt: start + UInt64(index))
            breaker.record(.healthy, sentAt: start - UInt64(index))
        }
        // The window rule counts the same way: the healthy verdicts of older requests are in it.
        breaker.record(.fault("503"), sentAt: start + 5)
        #expect(
            !breaker.isClosed, "5 faults of the latest requests; the earlier requests' answers do not break the run")
    }

    @Test func heldPushesWaitForAProbeAndAllGoWhenItIsAnswered() async {
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        for _ in 0..<5 { breaker.record(.fault("503 ServiceUnavailable")) }
        let all = await withTaskGroup(of: CircuitBreaker.Admission.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    let admission = await breaker.admit(deadline: Self.farAway)
                    if admission == .go(probe: true) { breaker.record(.healthy, probe: true) }
                    return admission
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(all.filter { $0 == .go(probe: true) }.count == 1, "one probe, then the rest together: \(all)")
        #expect(all.filter { $0 == .go(probe: false) }.count == 9)
        #expect(breaker.isClosed)
        #expect(transitions.all.map { "\($0.0)>\($0.1)" } == ["closed>open", "open>half_open", "half_open>closed"])
    }

    @Test func aFailedProbeOpensItAgainAndTheNextProbeCanCloseIt() async {
        let transitions = Transitions()
        let breaker = Self.quickBreaker(transitions)
        for _ in 0..<5 { breaker.record(.fault("503 ServiceUnavailable")) }
        var probes = 0
        while !breaker.isClosed {
            let admission = await breaker.admit(deadline: Self.farAway)
            #expect(admission == .go(probe: true))
            probes += 1
            breaker.record(probes < 3 ? .fault("503 ServiceUnavailable") : .healthy, probe: true)
        }
        #expect(probes == 3)
        // Failed probes are not news to an operator: one opening, one half-opening, one closing.
        #expect(transitions.all.map { "\($0.0)>\($0.1)" } == ["closed>open", "open>half_open", "half_open>closed"])
    }

    @Test func aProbeThatSaysNothingLetsTheNextWaiterProbe() async {
        let breaker = Self.quickBreaker(Transitions())
        for _ in 0..<5 { breaker.record(.fault("503")) }
        let first = await breaker.admit(deadline: Self.farAway)
        #expect(first == .go(probe: true))
        async let second = breaker.admit(deadline: Self.farAway)
        #expect(await eventually { breaker.snapshot.waiting == 1 }, "the second push never started waiting")
        breaker.record(.neutral, probe: true)  // e.g. the probe's stream was refused, never processed
        #expect(await second == .go(probe: true))
        breaker.record(.healthy, probe: true)
        #expect(breaker.isClosed)
    }

    @Test func aWaitEndsAtItsDeadline() async {
        let breaker = Self.quickBreaker(Transitions())
        for _ in 0..<5 { breaker.record(.fault("503")) }
        _ = await breaker.admit(deadline: Self.farAway)  // the probe, never answered
        let admission = await breaker.admit(deadline: MonotonicClock.now() &+ 50_000_000)
        #expect(admission == .deadlinePassed)
        #expect(breaker.snapshot.waiting == 0)
        let past = await breaker.admit(deadline: MonotonicClock.now())
        #expect(past == .deadlinePassed, "a deadline already passed does not wait at all")
    }

    @Test func aWithdrawnWaitEndsWithoutTouchingTheOthers() async {
        let breaker = Self.quickBreaker(Transitions())
        for _ in 0..<5 { breaker.record(.fault("503")) }
        _ = await breaker.admit(deadline: Self.farAway)  // the probe, never answered
        let withdrawal = SendWithdrawal()
        async let withdrawn = breaker.admit(deadline: Self.farAway, withdrawal: withdrawal)
        async let kept = breaker.admit(deadline: Self.farAway)
        #expect(await eventually { breaker.snapshot.waiting == 2 }, "the pushes never started waiting")
        withdrawal.withdraw()
        #expect(await withdrawn == .withdrawn)
        #expect(breaker.snapshot.waiting == 1, "the push without the withdrawal still waits")
        breaker.record(.healthy, probe: true)
        #expect(await kept == .go(probe: false))
        for _ in 0..<5 { breaker.record(.fault("503")) }
        let already = await breaker.admit(deadline: Self.farAway, withdrawal: withdrawal)
        #expect(already == .withdrawn, "a push withdrawn before it waits does not wait at all")
    }

    @Test func anAnswerFromAnEarlierPushClosesIt() {
        let breaker = Self.quickBreaker(Transitions())
        for _ in 0..<5 { breaker.record(.fault("503")) }
        breaker.record(.fault("503"))
        #expect(!breaker.isClosed, "a late fault of a push sent before the opening changes nothing")
        breaker.record(.healthy)
        #expect(breaker.isClosed, "APNs answered: the pool works")
    }

    @Test func verdictsTellFaultsOfThePoolFromFaultsOfThePush() {
        func verdict(_ outcome: AttemptOutcome) -> String {
            switch CircuitBreaker.Verdict(outcome) {
            case .healthy: return "healthy"
            case .fault: return "fault"
            case .neutral: return "neutral"
            }
        }
        func response(_ status: Int, _ reason: String?) -> AttemptOutcome {
            var response = APNsResponse(status: status)
            response.reason = reason.map(APNsErrorReason.init)
            return .response(response, retryAfter: nil)
        }
        #expect(verdict(response(200, nil)) == "healthy")
        for (status, reason) in [
            (410, "Unregistered"), (400, "BadDeviceToken"), (413, "PayloadTooLarge"),
            (400, "IdleTimeout"),
        ] {
            #expect(verdict(response(status, reason)) == "healthy", "\(reason) is about the push")
        }
        for (status, reason) in [
            (503, "ServiceUnavailable"), (500, "InternalServerError"), (429, "TooManyProviderTokenUpdates"),
        ] {
            #expect(verdict(response(status, reason)) == "fault", "\(reason)")
        }
        // APNs' limit on one device: the device throttle paces it; the pool is fine.
        #expect(verdict(response(429, "TooManyRequests")) == "neutral")
        for code in [
            HTTP2ClientError.Code.connectFailed, .connectTimeout, .tlsHandshakeFailed,
            .certificateVerificationFailed, .requestTimeout, .connectionClosed, .streamReset,
        ] {
            #expect(verdict(.transportFailure(HTTP2ClientError(code, "x", endpoint: "h:1"))) == "fault", "\(code)")
        }
        for code in [HTTP2ClientError.Code.unprocessed, .poolSaturated, .poolShutDown] {
            #expect(verdict(.transportFailure(HTTP2ClientError(code, "x", endpoint: "h:1"))) == "neutral", "\(code)")
        }
        #expect(verdict(.invalidRequest("too large")) == "neutral")
    }
}
