// What `bench send` measures with: a fixed-size latency histogram, process CPU and memory readings,
// and the machine's load average.

import Foundation
import Glibc
import Worker
import WorkerDev

/// Latencies in nanoseconds, log-linear buckets (32 per power of two, about 3% wide); fixed size, so
/// recording a million samples allocates nothing.
struct LatencyHistogram: Sendable {
    private static let subBuckets = 32
    private static let subBucketBits = 5
    private static let bucketCount = 64 * 32
    private(set) var counts = [UInt32](repeating: 0, count: LatencyHistogram.bucketCount)
    private(set) var total = 0

    mutating func record(nanoseconds: UInt64) {
        counts[Self.index(nanoseconds)] &+= 1
        total += 1
    }

    mutating func merge(_ other: LatencyHistogram) {
        for index in counts.indices { counts[index] &+= other.counts[index] }
        total += other.total
    }

    /// The latency at `quantile` (0...1), in nanoseconds (the bucket's midpoint).
    func value(at quantile: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = max(1, Int((quantile * Double(total)).rounded(.up)))
        var seen = 0
        for (index, count) in counts.enumerated() {
            seen += Int(count)
            if seen >= rank { return Self.midpoint(index) }
        }
        return Self.midpoint(counts.count - 1)
    }

    private static func index(_ value: UInt64) -> Int {
        if value < UInt64(subBuckets) { return Int(value) }
        let exponent = 63 - value.leadingZeroBitCount
        let sub = Int(value >> UInt64(exponent - subBucketBits)) & (subBuckets - 1)
        return min(bucketCount - 1, (exponent - subBucketBits + 1) * subBuckets + sub)
    }

    private static func midpoint(_ index: Int) -> UInt64 {
        if index < subBuckets { return UInt64(index) }
        let exponent = index / subBuckets + subBucketBits - 1
        let sub = UInt64(index % subBuckets)
        let low = (UInt64(subBuckets) + sub) << UInt64(exponent - subBucketBits)
        let width = UInt64(1) << UInt64(exponent - subBucketBits)
        return low + width / 2
    }
}

/// Process and machine readings.
enum ProcessReadings {
    /// User + system CPU of this process (`who` = RUSAGE_SELF) or of its waited-for children, in µs.
    static func cpuMicroseconds(children: Bool = false) -> Int64 {
        var usage = rusage()
        getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
        return Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000
            + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    }

    /// Peak resident set size in KiB (of this process, or the largest waited-for child).
    static func peakRSSKiB(children: Bool = false) -> Int {
        guard children else { return ProcessMemory.peakResidentKiB() }
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        return usage.ru_maxrss
    }

    /// Current resident set size in KiB, from /proc/self/statm.
    static func currentRSSKiB() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }

    /// The 1-minute load average and the number of CPUs.
    static func loadAverage() -> (oneMinute: Double, cpus: Int) {
        var loads = [Double](repeating: 0, count: 3)
        getloadavg(&loads, 3)
        return (loads[0], Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
