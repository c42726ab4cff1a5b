#include "engine/cpu/bf16_panel_kernel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/cpu/compute_peak.h"
#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {
namespace {

// ~0.25 ms per run at 3 GHz: four runs of each loop take a few ms, once per process.
constexpr int64_t kProbeIterations = 30'000;

double BestRate(double (*loop)(int64_t)) {
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {  // the first run warms the clocks and the caches
    const auto t0 = std::chrono::steady_clock::now();
    const double flops = loop(kProbeIterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0 && s > 0) best = std::max(best, flops / s);
  }
  return best;
}

Bf16PanelKernelChoice Choose() {
  Bf16PanelKernelChoice c;
  const bool has_dot = DetectedSimdLevel() >= SimdLevel::kAvx512Bf16;
  if (const char* env = std::getenv("CROSSREG_BF16_KERNEL")) {
    if (std::strcmp(env, "wide") == 0 || (std::strcmp(env, "dot") == 0 && has_dot)) {
      c.kernel = std::strcmp(env, "wide") == 0 ? Bf16PanelKernel::kWide : Bf16PanelKernel::kDot;
      c.reason = "CROSSREG_BF16_KERNEL";
      return c;
    }
  }
  if (!has_dot) {
    c.kernel = Bf16PanelKernel::kWide;
    c.reason = "no AVX512_BF16";
    return c;
  }
  c.dot_flops = BestRate(internal::DotBf16LoopAvx512Bf16);
  c.fma_flops = BestRate(internal::FmaLoopAvx512);
  c.kernel = c.fma_flops > kWideAdvantage * c.dot_flops ? Bf16PanelKernel::kWide : Bf16PanelKernel::kDot;
  c.reason = "measured";
  return c;
}

}  // namespace

const Bf16PanelKernelChoice& ChosenBf16PanelKernel() {
  static const Bf16PanelKernelChoice choice = Choose();
  return choice;
}

namespace {
// -1: none; else the Bf16PanelKernel's value.
std::atomic<int> g_override{-1};
}  // namespace

void OverrideBf16PanelKernelForBenchmark(Bf16PanelKernel kernel) { g_override = static_cast<int>(kernel); }
void ClearBf16PanelKernelOverride() { g_override = -1; }

Bf16PanelKernel Bf16PanelKernelAt(SimdLevel level) {
  if (level != SimdLevel::kAvx512Bf16) return Bf16PanelKernel::kWide;
  const int forced = g_override.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Bf16PanelKernel>(forced) : ChosenBf16PanelKernel().kernel;
}

const char* Bf16PanelKernelName(Bf16PanelKernel kernel) {
  return kernel == Bf16PanelKernel::kWide ? "widened f32 FMA" : "vdpbf16ps";
}

std::string Bf16PanelKernelSummary() {
  const Bf16PanelKernelChoice& c = ChosenBf16PanelKernel();
  char buf[160];
  if (c.dot_flops > 0) {
    std::snprintf(buf, sizeof(buf), "%s (one core measured: f32 FMA %.0f GFLOP/s, vdpbf16ps %.0f GFLOP/s)",
                  Bf16PanelKernelName(c.kernel), c.fma_flops / 1e9, c.dot_flops / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%s (%s)", Bf16PanelKernelName(c.kernel), c.reason);
  }
  return buf;
}

}  // namespace crossreg::cpu
