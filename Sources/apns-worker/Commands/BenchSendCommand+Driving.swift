// The measured loop: `concurrency` senders share the notifications, each recording its own latencies so
// that no lock is taken per notification; their results are merged at the end.

import APNs
import Platform

extension BenchSendCommand {
    /// `concurrency` senders share `count` notifications; each records its own latencies.
    static func drive(
        _ client: APNsClient, workload: BenchSendWorkload, count: Int, concurrency: Int,
        sampler: BenchSendRSSSampler?, executor: (any TaskExecutor)?, policy: RetryPolicy
    ) async -> BenchSendRunResult {
        if let executor {
            return await withTaskExecutorPreference(executor) {
                await drive(
                    client, workload: workload, count: count, concurrency: concurrency, sampler: sampler,
                    policy: policy)
            }
        }
        return await drive(
            client, workload: workload, count: count, concurrency: concurrency, sampler: sampler,
            policy: policy)
    }

    static func drive(
        _ client: APNsClient, workload: BenchSendWorkload, count: Int, concurrency: Int,
        sampler: BenchSendRSSSampler?, policy: RetryPolicy
    ) async -> BenchSendRunResult {
        let next = BenchSendCounter()
        return await withTaskGroup(of: BenchSendRunResult.self) { group in
            for _ in 0..<min(concurrency, count) {
                group.addTask {
                    await sendUntilDone(
                        client, workload: workload, count: count, next: next, sampler: sampler,
                        policy: policy)
                }
            }
            var total = BenchSendRunResult()
            for await part in group {
                total.histogram.merge(part.histogram)
                total.failures += part.failures
                total.attempts += part.attempts
                total.retried += part.retried
                total.firstError = total.firstError ?? part.firstError
            }
            return total
        }
    }

    /// One sender: takes the next notification number until `count` are taken.
    static func sendUntilDone(
        _ client: APNsClient, workload: BenchSendWorkload, count: Int, next: BenchSendCounter,
        sampler: BenchSendRSSSampler?, policy: RetryPolicy
    ) async -> BenchSendRunResult {
        var result = BenchSendRunResult()
        while true {
            let index = next.take()
            if index >= count { break }
            let started = MonotonicClock.now()
            var failure: String?
            if let transportTemplate = workload.transportTemplate {
                do {
                    let response = try await client.pool(for: .production)
                        .send(workload.transportRequest(index, template: transportTemplate))
                    if response.status != 200 { failure = "HTTP status \(response.status)" }
                } catch {
                    failure = "\(error)"
                }
            } else {
                let delivery = await client.send(workload.request(index), policy: policy)
                result.attempts += delivery.attempts.count
                if delivery.attempts.count > 1 { result.retried += 1 }
                if delivery.status != .delivered { failure = delivery.summary }
            }
            result.histogram.record(nanoseconds: MonotonicClock.now() - started)
            if let failure {
                result.failures += 1
                if result.firstError == nil { result.firstError = failure }
            }
            sampler?.completed()
        }
        return result
    }
}
