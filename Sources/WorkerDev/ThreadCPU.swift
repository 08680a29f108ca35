// CPU time by thread, for `bench pipeline`'s figures by part (worker, simulator, mock Kafka).

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// CPU time of this process's threads, summed by what they belong to, from /proc/self/task (threads
/// name themselves: `apns-sim-*` for the simulator, `rdk:mock` for librdkafka's mock brokers).
struct ThreadCPU {
    var worker = 0.0
    var simulator = 0.0
    var mockKafka = 0.0
    // The worker's part by thread: its event loops (records, rules, HTTP/2), librdkafka's threads and the
    // consumer's and producer's poll threads, and the rest (Swift's pool: the consumer hand-off).
    var eventLoops = 0.0
    var kafkaClients = 0.0
    /// How many event-loop threads there are at the end.
    var eventLoopThreads = 0

    /// Each live thread's name and CPU seconds so far, by thread id.
    typealias Snapshot = [Int32: (name: String, seconds: Double)]

    static func snapshot() -> Snapshot {
        var threads: Snapshot = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for task in tasks {
            guard let tid = Int32(task),
                let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                let seconds = cpuSeconds(thread: tid, task: task)
            else { continue }
            threads[tid] = (name, seconds)
        }
        return threads
    }

    /// The CPU each part spent since `earlier`, thread by thread: a thread born since counts from zero,
    /// and one that has exited since drops out rather than subtracting what it had spent before.
    static func since(_ earlier: Snapshot) -> ThreadCPU {
        var parts = ThreadCPU()
        for (tid, thread) in snapshot() {
            let seconds = thread.seconds - (earlier[tid]?.seconds ?? 0)
            let name = thread.name
            if name.hasPrefix("apns-sim") {
                parts.simulator += seconds
            } else if name.hasPrefix("rdk:mock") {
                parts.mockKafka += seconds
            } else {
                parts.worker += seconds
                if name.hasPrefix("h2-loop") {
                    parts.eventLoops += seconds
                    parts.eventLoopThreads += 1
                } else if name.hasPrefix("rdk:") || name.hasPrefix("kafka-") {
                    parts.kafkaClients += seconds
                }
            }
        }
        return parts
    }

    /// A thread's CPU time, to the nanosecond, from its CPU-time clock: /proc's utime and stime are whole
    /// clock ticks (10 ms) per thread, so a short run spread over 16 simulator connections read as 0.
    /// The clock id is the kernel's encoding of a per-thread scheduler clock (what glibc's
    /// `pthread_getcpuclockid` returns), which a process may read for any of its own threads.
    private static func cpuSeconds(thread tid: Int32, task: String) -> Double? {
        // The kernel's clock id layout (include/linux/posix-timers.h): the id inverted and shifted by 3,
        // then CPUCLOCK_PERTHREAD_MASK (4) and the scheduler clock, CPUCLOCK_SCHED (2).
        let perThreadSchedulerClock: clockid_t = 4 | 2
        var time = timespec()
        if clock_gettime((~tid) << 3 | perThreadSchedulerClock, &time) == 0 {
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }
        guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
            let afterName = stat.range(of: ") ", options: .backwards)
        else { return nil }
        // Fields after "(comm) ": state is field 3, so utime (14) and stime (15) are at 11 and 12.
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
