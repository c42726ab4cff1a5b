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

double BestRate(double (*loop)(int64_t), int64_t iterations = kProbeIterations) {
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {  // the first run warms the clocks and the caches
    const auto t0 = std::chrono::steady_clock::now();
    const double flops = loop(iterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0 && s > 0) best = std::max(best, flops / s);
  }
  return best;
}

Bf16PanelKernelChoice Choose() {
  Bf16PanelKernelChoice c;
  const bool has_dot = DetectedSimdLevel() >= SimdLevel::kAvx512Bf16;
  const bool has_amx = HasAmx();
  if (const char* env = std::getenv("CROSSREG_BF16_KERNEL")) {
    const bool wide = std::strcmp(env, "wide") == 0;
    const bool dot = std::strcmp(env, "dot") == 0 && has_dot;
    const bool amx = std::strcmp(env, "amx") == 0 && has_amx;
    if (wide || dot || amx) {
      c.kernel = wide ? Bf16PanelKernel::kWide : dot ? Bf16PanelKernel::kDot : Bf16PanelKernel::kAmx;
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
  // A tile loop iteration does 4 x 16384 FLOP where the vector loops do 24 x 32 x 2:
  // fewer iterations for as long a run.
  if (has_amx) c.amx_flops = BestRate(internal::DotBf16LoopAmx, kProbeIterations / 4);
  c.kernel = c.fma_flops > kWideAdvantage * c.dot_flops ? Bf16PanelKernel::kWide : Bf16PanelKernel::kDot;
  if (c.amx_flops > std::max(c.dot_flops, c.fma_flops)) c.kernel = Bf16PanelKernel::kAmx;
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
  // An override to AMX where the process cannot use it would fault: the chosen kernel runs.
  if (forced >= 0 && (static_cast<Bf16PanelKernel>(forced) != Bf16PanelKernel::kAmx || HasAmx())) {
    return static_cast<Bf16PanelKernel>(forced);
  }
  return ChosenBf16PanelKernel().kernel;
}

const char* Bf16PanelKernelName(Bf16PanelKernel kernel) {
  switch (kernel) {
    case Bf16PanelKernel::kWide: return "widened f32 FMA";
    case Bf16PanelKernel::kDot: return "vdpbf16ps";
    case Bf16PanelKernel::kAmx: return "AMX tdpbf16ps";
  }
  return "?";
}

std::string Bf16PanelKernelSummary() {
  const Bf16PanelKernelChoice& c = ChosenBf16PanelKernel();
  char buf[200];
  if (c.amx_flops > 0) {
    std::snprintf(buf, sizeof(buf),
                  "%s (one core measured: f32 FMA %.0f GFLOP/s, vdpbf16ps %.0f GFLOP/s, AMX tdpbf16ps %.0f GFLOP/s)",
                  Bf16PanelKernelName(c.kernel), c.fma_flops / 1e9, c.dot_flops / 1e9, c.amx_flops / 1e9);
  } else if (c.dot_flops > 0) {
    std::snprintf(buf, sizeof(buf), "%s (one core measured: f32 FMA %.0f GFLOP/s, vdpbf16ps %.0f GFLOP/s)",
                  Bf16PanelKernelName(c.kernel), c.fma_flops / 1e9, c.dot_flops / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%s (%s)", Bf16PanelKernelName(c.kernel), c.reason);
  }
  return buf;
}

}  // namespace crossreg::cpu
