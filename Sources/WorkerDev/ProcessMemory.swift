// The process's own peak memory, for the benches.

import Foundation

public enum ProcessMemory {
    /// The peak resident set size of this process since it was started, in KiB: VmHWM of /proc/self/status.
    ///
    /// Not `getrusage`'s `ru_maxrss`: Linux carries that across exec from the forked parent's pages, so a
    /// bench started by a large process (a test runner after a big test) reported the parent's size.
    public static func peakResidentKiB() -> Int {
        if let kib = statusField("VmHWM:") { return kib }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss
    }

    /// The resident set size now, in KiB (VmRSS); 0 when /proc cannot be read.
    public static func residentKiB() -> Int { statusField("VmRSS:") ?? 0 }

    private static func statusField(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) })
        else { return nil }
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
    }
}
