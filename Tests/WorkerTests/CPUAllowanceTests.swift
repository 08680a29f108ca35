// The default number of event loops follows the CPUs the process may use, a pod's CPU limit included.

import Foundation
import Testing

@testable import Worker

@Suite struct CPUAllowanceTests {
    @Test func cgroupV2QuotaIsReadFromCPUMax() {
        #expect(CPUAllowance.quota(cpuMax: "200000 100000\n") == 2)
        #expect(CPUAllowance.quota(cpuMax: "150000 100000") == 1.5)
        #expect(CPUAllowance.quota(cpuMax: "max 100000\n") == nil)
        #expect(CPUAllowance.quota(cpuMax: "") == nil)
        #expect(CPUAllowance.quota(cpuMax: "garbage") == nil)
    }

    @Test func cgroupV1QuotaIsQuotaOverPeriod() {
        #expect(CPUAllowance.quota(cfsQuota: "50000\n", cfsPeriod: "100000\n") == 0.5)
        #expect(CPUAllowance.quota(cfsQuota: "-1\n", cfsPeriod: "100000\n") == nil)
        #expect(CPUAllowance.quota(cfsQuota: "300000", cfsPeriod: "0") == nil)
    }

    @Test func theQuotaCapsTheProcessorsRoundedUp() {
        #expect(CPUAllowance.allowed(processors: 32, quota: 2) == 2)
        #expect(CPUAllowance.allowed(processors: 32, quota: 1.5) == 2)
        #expect(CPUAllowance.allowed(processors: 32, quota: 0.25) == 1)
        #expect(CPUAllowance.allowed(processors: 4, quota: 16) == 4)
        #expect(CPUAllowance.allowed(processors: 4, quota: nil) == 4)
        #expect(CPUAllowance.allowed(processors: 0, quota: nil) == 1)
    }

    @Test func theProcessOwnCgroupIsLookedAtBeforeTheRoot() {
        #expect(
            CPUAllowance.cgroupV2Directories(membership: "0::/kubepods/pod1/c1\n")
                == ["/sys/fs/cgroup/kubepods/pod1/c1", "/sys/fs/cgroup"])
        // In a cgroup namespace the process's cgroup is the root.
        #expect(CPUAllowance.cgroupV2Directories(membership: "0::/\n") == ["/sys/fs/cgroup"])
        // cgroup v1 lines are not v2 paths.
        #expect(CPUAllowance.cgroupV2Directories(membership: "4:cpu,cpuacct:/docker/abc\n") == ["/sys/fs/cgroup"])
    }

    @Test func thisMachinesAllowanceIsWithinItsProcessors() {
        let allowed = CPUAllowance.current()
        #expect(allowed >= 1 && allowed <= max(1, ProcessInfo.processInfo.activeProcessorCount))
    }
}
