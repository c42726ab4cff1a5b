// How many cores this process may actually use: the CPU affinity mask, capped by the
// cgroup CPU quota (a Kubernetes CPU limit). std::thread::hardware_concurrency()
// reports every core of the node, so a pod limited to 4 CPUs on a 64-core node would
// start 64 threads that the quota then throttles.
#pragma once

#include <optional>
#include <string>

namespace crossreg::cpu {

// max(1, min(affinity cores, ceil(cgroup quota / period))).
int UsableCores();

// The cgroup quota in CPUs from a cgroup v2 "cpu.max" line ("max 100000" or
// "200000 100000") or cgroup v1 quota/period values; nullopt when unlimited or
// unreadable. Exposed for tests.
std::optional<double> CpuLimitFromCgroupV2(const std::string& cpu_max);
std::optional<double> CpuLimitFromCgroupV1(long long quota_us, long long period_us);

}  // namespace crossreg::cpu
