// How many CPUs the process may really use: the CPUs it may run on, capped by its cgroup's CPU quota.
// A Kubernetes CPU limit is such a quota, not an affinity mask: a pod limited to 2 CPUs on a 32-core
// node sees 32 processors, and 32 event loops there would fight over 2 CPUs' worth of time slices.

import Foundation

enum CPUAllowance {
    /// The processors the process sees, capped by the CPU quota (rounded up: 1.5 CPUs allow 2 busy
    /// threads) when its cgroup has one. At least 1.
    static func current() -> Int {
        allowed(processors: ProcessInfo.processInfo.activeProcessorCount, quota: quotaOfThisProcess())
    }

    static func allowed(processors: Int, quota: Double?) -> Int {
        var count = max(1, processors)
        if let quota, quota > 0 { count = min(count, max(1, Int(quota.rounded(.up)))) }
        return count
    }

    /// The CPU quota in CPUs of the process's cgroup (v2 `cpu.max`, else v1 `cpu.cfs_quota_us` over
    /// `cpu.cfs_period_us`), or nil when there is none or it cannot be read.
    static func quotaOfThisProcess() -> Double? {
        let membership = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        // Inside a cgroup namespace (containers) the process's own cgroup is the root of /sys/fs/cgroup;
        // without one it is the path /proc/self/cgroup names.
        for directory in cgroupV2Directories(membership: membership) {
            if let text = try? String(contentsOfFile: directory + "/cpu.max", encoding: .utf8) {
                return quota(cpuMax: text)
            }
        }
        for directory in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            if let quotaText = try? String(contentsOfFile: directory + "/cpu.cfs_quota_us", encoding: .utf8),
                let periodText = try? String(contentsOfFile: directory + "/cpu.cfs_period_us", encoding: .utf8)
            {
                return quota(cfsQuota: quotaText, cfsPeriod: periodText)
            }
        }
        return nil
    }

    /// Where the process's v2 `cpu.max` may be: its own cgroup's directory first, then the root.
    static func cgroupV2Directories(membership: String) -> [String] {
        var directories: [String] = []
        for line in membership.split(separator: "\n") where line.hasPrefix("0::") {
            let path = line.dropFirst(3)
            if path != "/" && !path.isEmpty { directories.append("/sys/fs/cgroup" + path) }
        }
        directories.append("/sys/fs/cgroup")
        return directories
    }

    /// `cpu.max` holds "<quota> <period>" in microseconds, or "max <period>" for no limit.
    static func quota(cpuMax text: String) -> Double? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]), quota > 0,
            period > 0
        else { return nil }
        return quota / period
    }

    /// cgroup v1: a quota of -1 means no limit.
    static func quota(cfsQuota: String, cfsPeriod: String) -> Double? {
        guard let quota = Double(cfsQuota.trimmingCharacters(in: .whitespacesAndNewlines)),
            let period = Double(cfsPeriod.trimmingCharacters(in: .whitespacesAndNewlines)), quota > 0, period > 0
        else { return nil }
        return quota / period
    }
}
