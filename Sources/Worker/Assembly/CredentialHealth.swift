// Tells operators when APNs refuses a credential (a revoked key, a certificate for the wrong
// environment): logged once per pool with Apple's reason, the `credentials` readiness condition, and a
// gauge; and again once when the credential works. Watched through every attempt's answer.

import APNs
import Synchronization

/// Which pools' credentials APNs refuses now.
///
/// - Important: thread-safe; `observe` runs on the loop thread that ended an attempt, and costs one
///   atomic load for an answer that is neither a refusal nor the first success after one.
final class CredentialHealth: Sendable {
    private let logger: Logger
    private let readiness: Readiness
    /// Refused pools and Apple's reason.
    private let refused = Mutex<[String: String]>([:])
    private let anyRefused = Atomic<Bool>(false)

    init(logger: Logger, readiness: Readiness) {
        self.logger = logger.with(["component": "apns"])
        self.readiness = readiness
    }

    /// How many pools' credentials APNs refuses now.
    var refusedPools: Int { refused.withLock { $0.count } }

    func observe(pool: String, _ attempt: DeliveryAttempt) {
        if attempt.httpStatus == 200 {
            guard anyRefused.load(ordering: .relaxed) else { return }
            restore(pool)
        } else if attempt.httpStatus == 403, let reason = attempt.reason,
            APNsErrorReason(reason).knownClass == .badCredential
        {
            refuse(pool, reason: reason)
        }
    }

    private func refuse(_ pool: String, reason: String) {
        let (changed, all) = refused.withLock { refused -> (Bool, [String: String]) in
            let changed = refused[pool] != reason
            refused[pool] = reason
            anyRefused.store(true, ordering: .relaxed)
            return (changed, refused)
        }
        guard changed else { return }
        logger.error(
            "APNs refuses the credential of pool \(pool): \(reason); its pushes are parked on the retry "
                + "topic unsent, and one at a time asks APNs again (every 1 s growing to 5 s) until it works",
            ["pool": .string(pool), "reason": .string(reason)], rateLimitKey: "credential refused \(pool)")
        readiness.setNotReady(Readiness.Condition.credentials, reason: Self.describe(all))
    }

    private func restore(_ pool: String) {
        let (changed, all) = refused.withLock { refused -> (Bool, [String: String]) in
            let changed = refused.removeValue(forKey: pool) != nil
            if refused.isEmpty { anyRefused.store(false, ordering: .relaxed) }
            return (changed, refused)
        }
        guard changed else { return }
        logger.notice("APNs accepts the credential of pool \(pool) again", ["pool": .string(pool)])
        if all.isEmpty {
            readiness.setReady(Readiness.Condition.credentials)
        } else {
            readiness.setNotReady(Readiness.Condition.credentials, reason: Self.describe(all))
        }
    }

    private static func describe(_ refused: [String: String]) -> String {
        "APNs refuses credentials: "
            + refused.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            .joined(separator: "; ")
    }
}
