#include "engine/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace crossreg::cpu {
namespace {

SimdLevel Detect() {
  SimdLevel level = SimdLevel::kScalar;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = SimdLevel::kAvx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    level = SimdLevel::kAvx512;
  }
#endif
  // An override may only lower the level: asking for an ISA the CPU lacks would crash.
  if (const char* env = std::getenv("CROSSREG_SIMD")) {
    SimdLevel wanted = level;
    if (std::strcmp(env, "scalar") == 0) wanted = SimdLevel::kScalar;
    if (std::strcmp(env, "avx2") == 0) wanted = SimdLevel::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = SimdLevel::kAvx512;
    if (static_cast<int>(wanted) < static_cast<int>(level)) level = wanted;
  }
  return level;
}

}  // namespace

SimdLevel DetectedSimdLevel() {
  static const SimdLevel level = Detect();
  return level;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace crossreg::cpu
