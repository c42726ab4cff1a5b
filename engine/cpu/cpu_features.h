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
// VNNI BF16; AMX" or the part of it present ("AMX (not used: why)" where this process
// cannot use it). Benchmarks print it with every figure.
std::string CpuIsaSummary();

// AVX-512 VNNI (vpdpbusd: 8-bit dot products in one instruction), present or not.
bool HasAvx512Vnni();

// AMX (Advanced Matrix Extensions: tile registers of 16 rows x 64 bytes, multiplied by
// tdpbf16ps and tdpbusd), usable by this process: the CPU reports AMX-TILE, AMX-BF16 and
// AMX-INT8, the OS saves the tile state (XCR0 bits 17 and 18), and Linux granted the
// process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here; without the
// grant the first tile instruction faults). Its kernels run at the avx512bf16 level
// (every AMX CPU has AVX512_BF16), so CROSSREG_SIMD below it turns AMX off too;
// CROSSREG_AMX=0 turns it off alone (A/B comparisons, the other kernels' tests).
bool HasAmx();
// Why AMX is off: "" where HasAmx(), else "the CPU has no AMX", "CROSSREG_AMX=0",
// "CROSSREG_SIMD or the CPU is below avx512bf16", "the OS does not save the tile
// state" or "Linux refused the tile data (arch_prctl)".
const char* AmxUnavailableReason();

}  // namespace crossreg::cpu
