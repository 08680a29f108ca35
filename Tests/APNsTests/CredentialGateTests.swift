// The credential gate: once APNs refuses a credential, pushes are held back unsent and one at a time asks
// again, spaced by a growing interval; any other answer from APNs lets everything through again.

import Testing

@testable import APNs

struct CredentialGateTests {
    static let second: UInt64 = 1_000_000_000

    static func answer(_ status: Int, _ reason: APNsErrorReason? = nil) -> AttemptOutcome {
        .response(APNsResponse(status: status, reason: reason), retryAfter: nil)
    }

    static let refused = answer(403, .invalidProviderToken)

    func isHeldBack(_ gate: CredentialGate, at now: UInt64) -> Bool {
        if case .refused = gate.admit(now: now) { return true }
        return false
    }

    func isProbe(_ gate: CredentialGate, at now: UInt64) -> Bool {
        if case .probe = gate.admit(now: now) { return true }
        return false
    }

    @Test func passesEverythingUntilACredentialIsRefused() {
        let gate = CredentialGate()
        for outcome in [Self.answer(200), Self.answer(410, .unregistered), Self.answer(503, .serviceUnavailable)] {
            gate.record(outcome, probe: false, now: 0)
        }
        #expect(!gate.isRefusing)
        #expect(gate.heldBack(now: 0) == nil)
    }

    /// After a refusal every push is held back until the interval has passed; then exactly one goes as the
    /// probe, and the others are held back while it is out. Each refused probe doubles the interval, to its
    /// ceiling; refusals of pushes sent before the gate closed (not probes) do not move it.
    @Test func holdsBackAllButOneProbeAtATimeAndSpacesTheProbesOut() throws {
        let gate = CredentialGate()
        gate.record(Self.refused, probe: false, now: 0)
        #expect(gate.isRefusing)
        #expect(isHeldBack(gate, at: Self.second / 2))
        gate.record(Self.refused, probe: false, now: Self.second / 2)
        var probeAt = Self.second
        #expect(isHeldBack(gate, at: probeAt - 1), "a refusal sent before the gate closed does not delay the probe")
        var intervals: [UInt64] = []
        #expect(isProbe(gate, at: probeAt))
        for _ in 0..<6 {
            #expect(isHeldBack(gate, at: probeAt + 100 * Self.second), "one probe at a time")
            let answeredAt = probeAt + 1000
            gate.record(Self.refused, probe: true, now: answeredAt)
            // Held back until the next probe, which the last admission let out.
            var next = answeredAt
            while isHeldBack(gate, at: next) { next += Self.second / 4 }
            intervals.append((next - answeredAt + Self.second / 8) / Self.second)
            probeAt = next
        }
        #expect(intervals == [2, 4, 5, 5, 5, 5])
        let result = try #require(gate.heldBack(now: probeAt))
        #expect(result.status == .credentialRefused)
        #expect(result.attempts.isEmpty, "nothing was sent")
        #expect(result.response?.reason == .invalidProviderToken)
        #expect(result.summary.contains("not sent: APNs refused this credential (InvalidProviderToken)"))
    }

    /// A probe that got no answer (a timeout, a dropped connection) says nothing about the credential, but
    /// frees its place: the next push after it is the next probe, at the same interval.
    @Test func aProbeWithoutAnAnswerLetsTheNextPushProbe() {
        let gate = CredentialGate()
        gate.record(Self.refused, probe: false, now: 0)
        #expect(isProbe(gate, at: Self.second))
        #expect(isHeldBack(gate, at: Self.second + 1))
        gate.record(.cancelled, probe: true, now: 2 * Self.second)
        #expect(isProbe(gate, at: 2 * Self.second + 1))
        #expect(gate.isRefusing)
    }

    /// An answer that says nothing about the credential (try again later, on a new connection, with a new
    /// token) leaves the gate closed, and the next push probes, at the same interval.
    @Test(arguments: [
        APNsResponse(status: 503, reason: .serviceUnavailable), APNsResponse(status: 429, reason: .tooManyRequests),
        APNsResponse(status: 403, reason: .expiredProviderToken), APNsResponse(status: 410, reason: .shutdown),
    ])
    func anAnswerAboutNeitherTheCredentialNorThePushLeavesItClosed(response: APNsResponse) {
        let gate = CredentialGate()
        gate.record(Self.refused, probe: false, now: 0)
        #expect(isProbe(gate, at: Self.second))
        gate.record(.response(response, retryAfter: nil), probe: true, now: Self.second + 1)
        #expect(gate.isRefusing)
        #expect(isProbe(gate, at: Self.second + 2), "the next push probes at once")
    }

    /// An acceptance, or a verdict on the push itself (its device token is gone, the request is wrong), means
    /// APNs took the credential. Everything goes out again.
    @Test(arguments: [
        APNsResponse(status: 200), APNsResponse(status: 410, reason: .unregistered),
        APNsResponse(status: 400, reason: .badDeviceToken),
    ])
    func anAnswerAboutThePushOpensIt(response: APNsResponse) {
        let gate = CredentialGate()
        gate.record(Self.refused, probe: false, now: 0)
        #expect(isProbe(gate, at: Self.second))
        gate.record(.response(response, retryAfter: nil), probe: true, now: Self.second + 1)
        #expect(!gate.isRefusing)
        #expect(gate.heldBack(now: Self.second + 2) == nil)
        if case .send = gate.admit(now: Self.second + 2) {} else { Issue.record("a push is sent") }
        gate.record(Self.answer(403, .badCertificateEnvironment), probe: false, now: 3 * Self.second)
        #expect(gate.isRefusing, "and a new refusal closes it again")
    }
}
