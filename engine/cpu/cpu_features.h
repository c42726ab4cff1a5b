// Run-time CPU feature detection: the build targets baseline x86-64 and picks
// wider SIMD kernels only when the CPU it runs on has them.
#pragma once

#include <string>

namespace crossreg::cpu {

enum class SimdLevel { kScalar, kAvx2, kAvx512 };

// Detected once; CROSSREG_SIMD=scalar|avx2|avx512 lowers it (tests, comparisons).
SimdLevel DetectedSimdLevel();
const char* SimdLevelName(SimdLevel level);

// The processor's marketing name (/proc/cpuinfo "model name"), or "unknown CPU".
std::string CpuModelName();

}  // namespace crossreg::cpu
