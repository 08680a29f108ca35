// Runs blocking librdkafka calls on threads of their own, never on Swift's cooperative pool.

import Foundation
import Platform

#if canImport(Glibc)
import Glibc
#endif

enum DedicatedThread {
    /// Starts a long-lived thread (a client's poll loop).
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        do {
            try NamedThread.detached(name: name, body)
        } catch {
            // Without its poll thread a client would hang silently; no caller can do better than stop.
            fatalError("\(error): librdkafka's calls need a thread of their own")
        }
    }

    /// Sleeps the calling thread; only for threads this module owns (the poll threads).
    static func sleep(milliseconds: Int) {
        Thread.sleep(forTimeInterval: Double(milliseconds) / 1000)
    }

    /// Runs one blocking call on a new thread and returns its result to the awaiting task.
    /// Meant for rare calls (a synchronous commit, an offset query), not for the hot path.
    static func run<T: Sendable>(
        name: String, _ body: @escaping @Sendable () throws(KafkaError) -> T
    ) async throws(KafkaError) -> T {
        let result: Result<T, KafkaError> = await withCheckedContinuation { continuation in
            start(name: name) {
                do throws(KafkaError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Like `run(name:_:)`, but waits only until `deadline`: returns nil if the call has not returned by
    /// then, and the call goes on, on its thread, for as long as it takes (what it captures stays alive).
    /// For blocking calls that may not return while the cluster is away (a commit, a close).
    static func run<T: Sendable>(
        name: String, until deadline: ContinuousClock.Instant,
        _ body: @escaping @Sendable () throws(KafkaError) -> T
    ) async throws(KafkaError) -> T? {
        let result: Result<T, KafkaError>? = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let timer = Task {
                try? await Task.sleep(until: deadline, clock: .continuous)
                once.resume(returning: nil)
            }
            start(name: name) {
                do throws(KafkaError) {
                    once.resume(returning: .success(try body()))
                } catch {
                    once.resume(returning: .failure(error))
                }
                timer.cancel()
            }
        }
        return try result?.get()
    }
}
