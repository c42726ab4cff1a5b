#include "engine/cpu/usable_cores.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace crossreg::cpu {
namespace {

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::optional<std::string> ReadLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<double> CgroupLimit() {
  if (auto v2 = ReadLine("/sys/fs/cgroup/cpu.max")) return CpuLimitFromCgroupV2(*v2);
  auto quota = ReadLine("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  auto period = ReadLine("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  try {
    return CpuLimitFromCgroupV1(std::stoll(*quota), std::stoll(*period));
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<double> CpuLimitFromCgroupV2(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  try {
    const long long q = std::stoll(quota);
    if (q <= 0) return std::nullopt;
    return static_cast<double>(q) / static_cast<double>(period);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<double> CpuLimitFromCgroupV1(long long quota_us, long long period_us) {
  if (quota_us <= 0 || period_us <= 0) return std::nullopt;  // -1: unlimited
  return static_cast<double>(quota_us) / static_cast<double>(period_us);
}

int UsableCores() {
  int cores = AffinityCores();
  if (const auto limit = CgroupLimit()) cores = std::min(cores, static_cast<int>(std::ceil(*limit - 1e-9)));
  return std::max(1, cores);
}

}  // namespace crossreg::cpu
