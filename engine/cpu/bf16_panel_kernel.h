// Which instructions multiply bf16 weight panels on an AVX512_BF16 CPU.
//
// vdpbf16ps does 32 multiply-adds per instruction, twice an f32 FMA's 16, but its
// throughput differs by core: where it issues at the FMA's rate it doubles the math of
// a multi-row (verify, prefill) forward; where it issues at half that rate (the Xeon
// "model 207" VMs do) the widened path, bf16 weights turned into f32 and multiplied by
// FMAs with activations widened once per call, does the same math in half the time.
// Where the CPU has AMX (engine/cpu/cpu_features.h) one tdpbf16ps does 8192
// multiply-adds, over ten times the FMA's rate a core, so 16 or 32 verify rows cost the
// weight stream and little more. The rates by machine class: docs/benchmarks.md, the
// Xeon sections. So the choice is measured, once per process,
// from the instruction loops of engine/cpu/compute_peak.h.
//
// Each kernel is batch invariant on its own (linear_kernels.h); they round differently
// (vdpbf16ps adds each pair's odd product first, the widened path the even one, as the
// portable reference does; the tile multiplier sums in its own order), so a process
// never mixes them.
#pragma once

#include <string>

#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {

enum class Bf16PanelKernel {
  kDot,   // vdpbf16ps (linear_kernels_avx512bf16.cc)
  kWide,  // widened to f32, FMA (linear_kernels_avx512.cc; what AVX-512 CPUs without BF16 run)
  kAmx,   // AMX tdpbf16ps (linear_kernels_amx.cc), where HasAmx()
};

struct Bf16PanelKernelChoice {
  Bf16PanelKernel kernel = Bf16PanelKernel::kDot;
  // One core's measured rates, FLOP/s (0 where not measured: no AVX512_BF16, or the
  // environment chose).
  double dot_flops = 0;
  double fma_flops = 0;
  double amx_flops = 0;     // where HasAmx()
  const char* reason = "";  // "measured", "CROSSREG_BF16_KERNEL", "no AVX512_BF16"
};

// Decided on first use: CROSSREG_BF16_KERNEL=dot|wide|amx forces a kernel (tests, A/B
// comparisons; `dot` on a CPU without AVX512_BF16, or `amx` without HasAmx(), is
// ignored). Otherwise AMX where one core's tile rate beats both other rates, else the
// widened path where one core's f32 FMA rate beats its bf16 dot-product rate by more
// than the widening costs (kWideAdvantage), else vdpbf16ps.
const Bf16PanelKernelChoice& ChosenBf16PanelKernel();
// Benchmarks only (crossreg-bench-decode times both kernels in one run): every later
// forward runs `kernel`, or the chosen one again after ClearBf16PanelKernelOverride. An
// engine serving requests never calls it: its outputs would mix the kernels' rounding.
void OverrideBf16PanelKernelForBenchmark(Bf16PanelKernel kernel);
void ClearBf16PanelKernelOverride();

// The kernel bf16 panels run at `level`: the chosen one with AVX512_BF16, else widened
// (the AVX2 and portable kernels widen too, from their own pair layout).
Bf16PanelKernel Bf16PanelKernelAt(SimdLevel level);
const char* Bf16PanelKernelName(Bf16PanelKernel kernel);
// "widened f32 FMA (one core measured: f32 FMA 168 GFLOP/s, vdpbf16ps 82 GFLOP/s)", or
// the kernel with why it was chosen: what benchmarks print beside the SIMD level.
std::string Bf16PanelKernelSummary();

// The widened path spends 4 widening instructions per K step beside 4 FMAs per row:
// ~8% over the FMAs at a 12-row tile. It is chosen only when FMAs are faster than that.
inline constexpr double kWideAdvantage = 1.1;

}  // namespace crossreg::cpu
