#include "engine/cpu/compute_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {
namespace {

double Rate(ThreadPool& pool, double (*loop)(int64_t), int repeats) {
  constexpr int64_t kIterations = 4'000'000;  // ~0.05 s per thread at 4 GHz
  double best = 0;
  for (int rep = 0; rep <= repeats; ++rep) {  // the first run warms clocks up
    std::atomic<int64_t> flops_x1000{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(pool.num_threads(), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) flops_x1000 += static_cast<int64_t>(loop(kIterations) / 1000);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, static_cast<double>(flops_x1000.load()) * 1000 / s);
  }
  return best;
}

}  // namespace

ComputePeaks MeasureComputePeaks(ThreadPool& pool, int repeats) {
  ComputePeaks peaks;
  if (DetectedSimdLevel() >= SimdLevel::kAvx512) peaks.f32_fma_flops = Rate(pool, internal::FmaLoopAvx512, repeats);
  if (DetectedSimdLevel() >= SimdLevel::kAvx512Bf16) {
    peaks.bf16_dot_flops = Rate(pool, internal::DotBf16LoopAvx512Bf16, repeats);
  }
  return peaks;
}

}  // namespace crossreg::cpu
