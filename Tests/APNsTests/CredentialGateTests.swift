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
        #expect(intervals == [2, 4, 8, 10, 10, 10])
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

    /// Any answer that is not a credential refusal means APNs took the credential: an acceptance, or a refusal
    /// of the push itself (its device token is gone). Everything goes out again.
    @Test(arguments: [200, 410])
    func anyOtherAnswerFromAPNsOpensIt(status: Int) {
        let gate = CredentialGate()
        gate.record(Self.refused, probe: false, now: 0)
        #expect(isProbe(gate, at: Self.second))
        gate.record(Self.answer(status, status == 410 ? .unregistered : nil), probe: true, now: Self.second + 1)
        #expect(!gate.isRefusing)
        #expect(gate.heldBack(now: Self.second + 2) == nil)
        if case .send = gate.admit(now: Self.second + 2) {} else { Issue.record("a push is sent") }
        gate.record(Self.answer(403, .badCertificateEnvironment), probe: false, now: 3 * Self.second)
        #expect(gate.isRefusing, "and a new refusal closes it again")
    }
}
