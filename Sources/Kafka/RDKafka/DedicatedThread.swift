// Runs blocking librdkafka calls on threads of their own, never on Swift's cooperative pool.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

enum DedicatedThread {
    /// Starts a long-lived thread (a client's poll loop).
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            // The OS thread name (Linux keeps 15 bytes), for top -H and per-thread CPU. Not
            // `Thread.current.name`: Foundation drops it when the new thread runs before `start()` has
            // stored its handle (see APNs' CurrentThread, which this module does not depend on).
            let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if descriptor >= 0 {
                let bytes = Array(name.utf8.prefix(15))
                _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                close(descriptor)
            }
            body()
        }
        thread.start()
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
}
