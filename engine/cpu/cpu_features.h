// Run-time CPU feature detection: the build targets baseline x86-64 and picks wider
// SIMD kernels only when the CPU it runs on has them. Never crash on a CPU without an
// ISA: every level's kernels live in files compiled for it and are called only when
// the level is detected.
#pragma once

#include <string>
#include <vector>

namespace crossreg::cpu {

// Ordered: each level includes the ones before it.
enum class SimdLevel {
  kScalar,      // portable C++
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL/DQ
  kAvx512Bf16,  // plus AVX512_BF16: vdpbf16ps, used where it beats f32 FMAs (bf16_panel_kernel.h)
};

// Detected once; CROSSREG_SIMD=scalar|avx2|avx512|avx512bf16 lowers it (tests,
// comparisons). Asking for a level the CPU lacks keeps the detected one.
SimdLevel DetectedSimdLevel();
const char* SimdLevelName(SimdLevel level);
// Every level from kScalar up to the detected one (tests run each path).
std::vector<SimdLevel> AvailableSimdLevels();
// `wanted`, or the detected level when that is lower.
SimdLevel ClampSimdLevel(SimdLevel wanted);

// The processor's marketing name (/proc/cpuinfo "model name") with its family and
// model numbers (a cloud VM's name is often just "AMD EPYC": the numbers tell Zen 3
// from Zen 4 from Zen 5), or "unknown CPU".
std::string CpuModelName();

// What the CPU offers, whatever CROSSREG_SIMD says: "AVX2 FMA F16C; AVX-512 F/BW/VL/DQ
// VNNI BF16; AMX" or the part of it present. Benchmarks print it with every figure.
std::string CpuIsaSummary();

// AVX-512 VNNI (vpdpbusd: 8-bit dot products in one instruction), present or not.
bool HasAvx512Vnni();

}  // namespace crossreg::cpu
