// What /healthz and /readyz report. Liveness: every registered loop has beaten within its allowance.
// Readiness: every named condition the worker declared (config, credentials, consumer group, APNs) holds.

import APNs
public import JSON
import Synchronization

/// A health verdict and the JSON body that explains it.
public struct HealthReport: Sendable {
    /// Whether the check passes (HTTP 200) or not (HTTP 503).
    public var isPassing: Bool
    public var body: JSONValue
}

/// The heartbeats of the worker's long-running loops, for the liveness probe.
///
/// A loop registers once with an allowance (how long it may go without turning, say three times its
/// longest wait), then calls `beat()` every turn. The process is unhealthy when any registered loop has
/// not beaten within its allowance: it is alive but stuck, and a restart helps.
///
/// - Important: Thread-safe. `beat()` is one atomic store; `register`, `retire` and `report` take a lock.
public final class Liveness: Sendable {
    private let clock: MonotonicNanoseconds
    private let heartbeats = Mutex<[Heartbeat]>([])

    public init(clock: @escaping MonotonicNanoseconds = SystemClocks.monotonic) {
        self.clock = clock
    }

    /// Registers a loop (counted as having just beaten). A loop registered again under the same name
    /// replaces the earlier registration, so a restarted loop does not leave a stale heartbeat behind.
    public func register(_ name: String, allowance: Duration) -> Heartbeat {
        let heartbeat = Heartbeat(name: name, allowance: allowance, clock: clock, liveness: self)
        heartbeats.withLock { beats in
            beats.removeAll { $0.name == name }
            beats.append(heartbeat)
        }
        return heartbeat
    }

    fileprivate func retire(_ heartbeat: Heartbeat) {
        heartbeats.withLock { beats in beats.removeAll { $0 === heartbeat } }
    }

    /// Healthy when every registered loop beat within its allowance (or none is registered).
    public func report() -> HealthReport {
        let now = clock()
        var loops: [JSONValue] = []
        var stalled: [JSONValue] = []
        for heartbeat in heartbeats.withLock({ $0 }) {
            let sinceBeat = heartbeat.nanosecondsSinceBeat(now: now)
            let isBeating = sinceBeat <= heartbeat.allowance.nanosecondsClamped
            if !isBeating { stalled.append(.string(heartbeat.name)) }
            loops.append([
                "name": .string(heartbeat.name), "beating": .bool(isBeating),
                "seconds_since_beat": .double(Double(sinceBeat) / 1e9),
                "allowance_seconds": .double(Double(heartbeat.allowance.nanosecondsClamped) / 1e9),
            ])
        }
        let body: JSONValue = [
            "status": stalled.isEmpty ? "ok" : "stalled", "stalled": .array(stalled), "loops": .array(loops),
        ]
        return HealthReport(isPassing: stalled.isEmpty, body: body)
    }
}

/// One loop's heartbeat; see `Liveness`.
///
/// - Important: Thread-safe; `beat()` is a single relaxed atomic store of the monotonic time.
public final class Heartbeat: Sendable {
    public let name: String
    /// How long the loop may go without a beat before the process counts as stuck.
    public let allowance: Duration
    private let lastBeat: Atomic<UInt64>
    private let clock: MonotonicNanoseconds
    private let retireFromLiveness: @Sendable (Heartbeat) -> Void

    fileprivate init(name: String, allowance: Duration, clock: @escaping MonotonicNanoseconds, liveness: Liveness) {
        self.name = name
        self.allowance = allowance
        self.clock = clock
        lastBeat = Atomic(clock())
        retireFromLiveness = { [weak liveness] heartbeat in liveness?.retire(heartbeat) }
    }

    /// Records that the loop turned.
    public func beat() {
        lastBeat.store(clock(), ordering: .relaxed)
    }

    /// Unregisters the loop (it finished on purpose, for example at shutdown); it no longer counts.
    public func retire() {
        retireFromLiveness(self)
    }

    fileprivate func nanosecondsSinceBeat(now: UInt64) -> UInt64 {
        let last = lastBeat.load(ordering: .relaxed)
        return now > last ? now - last : 0
    }
}

/// Named conditions that must all hold before the worker takes traffic, for the readiness probe.
///
/// A declared condition starts not ready. The worker flips each as it learns: config loaded, credentials
/// loaded, Kafka brokers answering, consumer joined its group, APNs reachable; and back when it loses one.
///
/// - Important: Thread-safe; every call takes a short lock.
public final class Readiness: Sendable {
    /// The conditions `apns-worker run` declares.
    public enum Condition {
        /// The configuration and rules file were read and are valid.
        public static let config = "config"
        /// Every credential (provider-token key, client certificate) was loaded.
        public static let credentials = "credentials"
        /// The consumer is a member of its group: it has joined (partitions or not) and not lost its
        /// assignment since. Re-evaluated at every rebalance.
        public static let consumerGroup = "kafka.group"
        /// Some Kafka broker answers the consumer. Re-evaluated from librdkafka's connection errors and
        /// its statistics (every second).
        public static let kafkaBrokers = "kafka.brokers"
        /// At least one connection to each configured APNs environment is up.
        public static let apns = "apns"
        public static let all = [config, credentials, kafkaBrokers, consumerGroup, apns]
    }

    private struct Entry {
        var name: String
        var isReady: Bool
        var reason: String?
    }

    private let entries = Mutex<[Entry]>([])

    /// Declares `conditions`, each not ready until set.
    public init(conditions: [String] = []) {
        for name in conditions { declare(name) }
    }

    /// Declares a condition (not ready) if it is not declared yet.
    public func declare(_ name: String, reason: String = "not checked yet") {
        entries.withLock { entries in
            if !entries.contains(where: { $0.name == name }) {
                entries.append(Entry(name: name, isReady: false, reason: reason))
            }
        }
    }

    /// Marks a condition as holding (declaring it if needed).
    public func setReady(_ name: String) {
        update(name, isReady: true, reason: nil)
    }

    /// Marks a condition as not holding, with a reason an operator can act on. The reason is scrubbed of
    /// anything that looks like a secret before it is shown.
    public func setNotReady(_ name: String, reason: String) {
        update(name, isReady: false, reason: LogRedaction.scrub(reason))
    }

    /// Whether every declared condition holds.
    public var isReady: Bool { entries.withLock { $0.allSatisfy(\.isReady) } }

    /// Ready when every declared condition holds; the body names those that do not, with their reasons.
    public func report() -> HealthReport {
        let snapshot = entries.withLock { $0 }
        let notReady = snapshot.filter { !$0.isReady }
        let conditions: [JSONValue] = snapshot.map { entry in
            var object: JSONObject = ["name": .string(entry.name), "ready": .bool(entry.isReady)]
            if let reason = entry.reason { object["reason"] = .string(reason) }
            return .object(object)
        }
        let body: JSONValue = [
            "status": notReady.isEmpty ? "ready" : "not ready",
            "not_ready": .array(notReady.map { .string($0.name) }),
            "conditions": .array(conditions),
        ]
        return HealthReport(isPassing: notReady.isEmpty, body: body)
    }

    private func update(_ name: String, isReady: Bool, reason: String?) {
        entries.withLock { entries in
            if let index = entries.firstIndex(where: { $0.name == name }) {
                entries[index].isReady = isReady
                entries[index].reason = reason
            } else {
                entries.append(Entry(name: name, isReady: isReady, reason: reason))
            }
        }
    }
}
