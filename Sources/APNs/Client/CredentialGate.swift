// Holds a refused credential's pushes back from APNs. Once APNs refuses a pool's credential (a revoked key,
// a certificate for the other environment), every further push with it would be refused the same way: it
// is settled `credentialRefused` without a request (the worker parks it), and one push at a time goes out
// as a probe, spaced by a growing interval, until APNs answers one otherwise.

public import HTTP2
import Platform
import Synchronization

/// The credential gate of one pool (environment × credential).
///
/// Why not send them all: a backlog for a revoked key was a 403 per push, and again at every return from
/// the retry topic: APNs was asked tens of thousands of times what one answer had said, the pool grew on
/// the queue of requests that APNs throttles to one stream after a refusal, and the refusals crowded out
/// nothing useful but cost the CPU and the connections all the same.
///
/// - Important: thread-safe. `isRefusing` is one atomic load, and recording an answer while the gate passes
///   everything costs that load and no more unless the answer is itself a credential refusal.
public final class CredentialGate: Sendable {
    /// What to do with a push about to be sent.
    enum Admission: Sendable {
        /// Send it: the credential is not known to be refused.
        case send
        /// Send it as the probe: the credential was refused, and it is time to ask again.
        case probe
        /// Do not send it: APNs refused the credential (`heldBack` says how).
        case refused
    }

    private struct Refusal {
        var response: APNsResponse
        var since: UInt64
        var nextProbeAt: UInt64
        var probeInFlight = false
        /// Probes APNs refused in a row: the interval's exponent.
        var refusedProbes = 0
    }

    /// Time between probes: the first a second after the refusal, doubling with each probe refused, to 5 s:
    /// how long after a fixed credential (or APNs taking it again) its pushes still go to the retry topic.
    public let probeInterval: ExponentialBackoff
    private let refusing = Atomic<Bool>(false)
    private let refusal = Mutex<Refusal?>(nil)

    public init(probeInterval: ExponentialBackoff = ExponentialBackoff(initial: .seconds(1), maximum: .seconds(5))) {
        self.probeInterval = probeInterval
    }

    /// Whether APNs refuses the credential now (until a probe is answered otherwise).
    public var isRefusing: Bool { refusing.load(ordering: .relaxed) }

    /// Whether a push's first attempt goes out: one atomic load while nothing is refused.
    @inline(__always)
    func admitFirstAttempt() -> Admission { isRefusing ? admit() : .send }

    /// Whether a push goes out; call only when `isRefusing` (else it does).
    func admit(now: UInt64 = MonotonicClock.now()) -> Admission {
        refusal.withLock { refusal in
            guard var current = refusal else { return .send }
            if !current.probeInFlight && now >= current.nextProbeAt {
                current.probeInFlight = true
                refusal = current
                return .probe
            }
            return .refused
        }
    }

    /// The result of a push the gate held back: `credentialRefused` with APNs' last refusal, and a summary
    /// that says it was not sent and when the credential is asked again. Nil once the gate passes pushes
    /// again (a probe was answered otherwise meanwhile): the push is then to be sent.
    func heldBack(now: UInt64 = MonotonicClock.now()) -> DeliveryResult? {
        refusal.withLock { refusal in
            guard let current = refusal else { return nil }
            let reason = current.response.reason?.rawValue ?? "\(current.response.status)"
            let ago = Self.seconds(now &- current.since)
            let next =
                current.probeInFlight
                ? "a probe is out" : "the next probe in \(Self.seconds(current.nextProbeAt &- now)) s"
            return DeliveryResult(
                status: .credentialRefused, response: current.response, attempts: [],
                summary: "not sent: APNs refused this credential (\(reason)) \(ago) s ago, and asks it again with "
                    + "one push at a time until it is taken; \(next)")
        }
    }

    private static func seconds(_ nanoseconds: UInt64) -> String {
        let tenths = (nanoseconds &+ 50_000_000) / 100_000_000
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// What an attempt's answer says about the credential. `probe`: the attempt was admitted as the probe.
    ///
    /// A credential refusal closes the gate (or keeps it closed, a refused probe doubling the interval). An
    /// acceptance, or a verdict on the push itself (its device token is dead, the request is wrong), means
    /// APNs took the credential, and opens it. Anything else says nothing about the credential: no answer, or
    /// one to try again later (503, 429), on a new connection or with a new token; a probe that got such an
    /// answer frees the probe's place for the next push, at the same interval.
    func record(_ outcome: AttemptOutcome, probe: Bool, now: UInt64 = MonotonicClock.now()) {
        guard case .response(let response, _) = outcome else {
            if probe { probeEndedWithoutVerdict() }
            return
        }
        if response.isAccepted {
            if isRefusing { open() }
            return
        }
        switch response.reasonClass ?? .permanent {
        case .badCredential:
            refuse(response, probe: probe, now: now)
        case .invalidToken, .permanent:
            if isRefusing { open() }
        case .retryWithBackoff, .retryOnNewConnection, .refreshProviderToken:
            if probe { probeEndedWithoutVerdict() }
        }
    }

    /// The next push may probe, at the interval already set.
    private func probeEndedWithoutVerdict() {
        refusal.withLock { $0?.probeInFlight = false }
    }

    /// APNs answered ExpiredProviderToken again to a token signed after its first one: the credential (a clock
    /// far off, say) is what is wrong, though each answer alone asks only for a new token. Closes the gate as a
    /// refused probe would, so that the next probe waits its interval rather than going with the next push.
    func expiredAgainAfterRefresh(_ response: APNsResponse, now: UInt64 = MonotonicClock.now()) {
        refuse(response, probe: true, now: now)
    }

    private func open() {
        refusal.withLock { refusal in
            refusal = nil
            refusing.store(false, ordering: .relaxed)
        }
    }

    private func refuse(_ response: APNsResponse, probe: Bool, now: UInt64) {
        refusal.withLock { refusal in
            var current = refusal ?? Refusal(response: response, since: now, nextProbeAt: now)
            current.response = response
            // Only the probe's answer moves the next probe: refusals of pushes sent before the gate closed
            // arrive in a burst, and each would otherwise double the interval.
            if probe || refusal == nil {
                if probe { current.refusedProbes += 1 }
                current.probeInFlight = false
                current.nextProbeAt =
                    now &+ probeInterval.ceiling(afterFailures: current.refusedProbes + 1).nanosecondsClamped
            }
            refusal = current
            refusing.store(true, ordering: .relaxed)
        }
    }
}
