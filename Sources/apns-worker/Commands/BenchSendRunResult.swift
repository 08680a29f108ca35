// What the senders of a run collected: each keeps its own, merged when the run ends.

/// Latencies, failures and retries of some senders.
struct BenchSendRunResult: Sendable {
    var histogram = LatencyHistogram()
    var failures = 0
    var attempts = 0
    var retried = 0
    var firstError: String?
}
