// What the worker tells operators about its APNs pools: each circuit breaker's changes, logged once
// with their cause, the `apns` readiness condition, and the breaker and held-push gauges.

import APNs
import JSON
import Synchronization

/// The health of every APNs pool (environment × credential) of the worker.
///
/// - Important: thread-safe; `transition` is called on whichever thread changed a breaker.
final class APNsPoolHealth: Sendable {
    private let logger: Logger
    private let readiness: Readiness
    /// Pools whose breaker is not closed, with the fault that opened it.
    private let down = Mutex<[String: String]>([:])

    init(logger: Logger, readiness: Readiness) {
        self.logger = logger.with(["component": "apns"])
        self.readiness = readiness
    }

    /// The pool's name in logs and metric labels: `environment/credential`.
    static func poolName(environment: APNsEnvironment, credential: String) -> String {
        "\(environment.rawValue)/\(credential)"
    }

    func transition(pool: String, _ transition: CircuitBreaker.Transition) {
        // How many pushes wait shows in /metrics as it grows; at the opening it is still 0.
        let fields: JSONObject = ["pool": .string(pool), "cause": .string(transition.cause)]
        switch transition.to {
        case .open:
            var withProbe = fields
            if let probeIn = transition.probeIn {
                // Whole seconds alone would say 0 for the first probes, which come within a second.
                withProbe["probe_in_seconds"] = .double((Double(probeIn.nanosecondsClamped) / 1e6).rounded() / 1000)
            }
            logger.warning(
                "APNs pool \(pool) is down; its pushes wait (no attempts spent) until it answers again",
                withProbe, rateLimitKey: "apns pool down \(pool)")
        case .halfOpen:
            logger.info("APNs pool \(pool): probing whether APNs answers again", fields)
        case .closed:
            var released = fields
            released["pushes_released"] = .int(Int64(transition.waiting))
            logger.notice("APNs pool \(pool) is up again; waiting pushes go out", released)
        }
        let stillDown = down.withLock { down -> [String: String] in
            if transition.to == .closed { down[pool] = nil } else if down[pool] == nil { down[pool] = transition.cause }
            return down
        }
        if stillDown.isEmpty {
            readiness.setReady(Readiness.Condition.apns)
        } else {
            let reasons = stillDown.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            readiness.setNotReady(
                Readiness.Condition.apns, reason: "APNs pools down: " + reasons.joined(separator: "; "))
        }
    }

    /// Sets the breaker gauges from the breakers themselves, at scrape time.
    static func collect(_ breakers: [(pool: String, breaker: CircuitBreaker)], into metrics: WorkerMetrics) {
        var held = 0
        for (pool, breaker) in breakers {
            let snapshot = breaker.snapshot
            held += snapshot.waiting
            for state in [CircuitBreaker.State.closed, .halfOpen, .open] {
                metrics.apnsBreakerState.labels(pool, state.rawValue).set(snapshot.state == state ? 1 : 0)
            }
        }
        metrics.pushesHeld.set(held)
    }
}
