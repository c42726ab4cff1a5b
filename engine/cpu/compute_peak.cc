#include "engine/cpu/compute_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {
namespace {

double Rate(ThreadPool& pool, double (*loop)(int64_t), int repeats, int64_t iterations) {
  double best = 0;
  for (int rep = 0; rep <= repeats; ++rep) {  // the first run warms clocks up
    std::atomic<int64_t> ops_x1000{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(pool.num_threads(), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ops_x1000 += static_cast<int64_t>(loop(iterations) / 1000);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, static_cast<double>(ops_x1000.load()) * 1000 / s);
  }
  return best;
}

// ~0.05 s per thread at 4 GHz for the vector loops; the portable ones do less per
// iteration, so fewer iterations keep them as short.
constexpr int64_t kIterations = 4'000'000;
constexpr int64_t kPortableIterations = 1'000'000;
// A tile loop iteration is four tile multiplies (~60 cycles): as long a run in fewer.
constexpr int64_t kAmxIterations = 500'000;

}  // namespace

namespace internal {

double FmaLoopPortable(int64_t iterations) {
  float acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = static_cast<float>(i) * 1e-3f;
  for (int64_t it = 0; it < iterations; ++it) {
    for (float& a : acc) a = a * 0.999f + 1e-4f;
  }
  float sum = 0;
  for (float a : acc) sum += a;
  PeakSink() = sum;
  return static_cast<double>(iterations) * 8 * 2;
}

double DotInt8LoopPortable(int64_t iterations) {
  int32_t acc[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  volatile int8_t a_in = 3, b_in = -2;  // not folded into a constant
  const int32_t a = a_in, b = b_in;
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 8; ++i) acc[i] += a * (b + i);
  }
  int32_t sum = 0;
  for (int32_t v : acc) sum += v;
  PeakSink() = static_cast<float>(sum);
  return static_cast<double>(iterations) * 8 * 2;
}

}  // namespace internal

ComputePeaks::Peak ComputePeaks::PeakFor(DType weights) const {
  if (IsQuantized(weights)) return {int8_dot_ops, "int8 dot-product"};
  const bool bf16 = weights == DType::kBF16 || weights == DType::kF16;
  if (bf16 && amx_bf16_flops > 0 && ChosenBf16PanelKernel().kernel == Bf16PanelKernel::kAmx) {
    return {amx_bf16_flops, "AMX bf16"};
  }
  if (bf16 && bf16_dot_flops > 0 && ChosenBf16PanelKernel().kernel == Bf16PanelKernel::kDot) {
    return {bf16_dot_flops, "bf16 dot-product"};
  }
  return {f32_fma_flops, "f32 FMA"};
}

ComputePeaks MeasureComputePeaks(ThreadPool& pool, int repeats) {
  ComputePeaks peaks;
  const SimdLevel level = DetectedSimdLevel();
  if (level >= SimdLevel::kAvx512) {
    peaks.f32_fma_flops = Rate(pool, internal::FmaLoopAvx512, repeats, kIterations);
    peaks.f32_isa = "AVX-512 vfmadd";
  } else if (level >= SimdLevel::kAvx2) {
    peaks.f32_fma_flops = Rate(pool, internal::FmaLoopAvx2, repeats, kIterations);
    peaks.f32_isa = "AVX2 vfmadd";
  } else {
    peaks.f32_fma_flops = Rate(pool, internal::FmaLoopPortable, repeats, kPortableIterations);
    peaks.f32_isa = "portable";
  }
  if (level >= SimdLevel::kAvx512Bf16) {
    peaks.bf16_dot_flops = Rate(pool, internal::DotBf16LoopAvx512Bf16, repeats, kIterations);
  }
  if (HasAmx()) {
    peaks.amx_bf16_flops = Rate(pool, internal::DotBf16LoopAmx, repeats, kAmxIterations);
    peaks.amx_int8_ops = Rate(pool, internal::DotInt8LoopAmx, repeats, kAmxIterations);
  }
  if (level >= SimdLevel::kAvx512 && HasAvx512Vnni()) {
    peaks.int8_dot_ops = Rate(pool, internal::DotInt8LoopAvx512Vnni, repeats, kIterations);
    peaks.int8_isa = "AVX-512 VNNI vpdpbusd";
  } else if (level >= SimdLevel::kAvx512) {
    peaks.int8_dot_ops = Rate(pool, internal::DotInt8LoopAvx512, repeats, kIterations);
    peaks.int8_isa = "AVX-512 vpmaddubsw";
  } else if (level >= SimdLevel::kAvx2) {
    peaks.int8_dot_ops = Rate(pool, internal::DotInt8LoopAvx2, repeats, kIterations);
    peaks.int8_isa = "AVX2 vpmaddubsw";
  } else {
    peaks.int8_dot_ops = Rate(pool, internal::DotInt8LoopPortable, repeats, kPortableIterations);
    peaks.int8_isa = "portable";
  }
  // The AVX2 quantized kernel's signed step (engine/cpu/linear.cc QuantKernelAt: AVX-512
  // without VNNI runs it too).
  if (level >= SimdLevel::kAvx2 && !(level >= SimdLevel::kAvx512 && HasAvx512Vnni())) {
    peaks.int8_signed_dot_ops = Rate(pool, internal::DotInt8SignedLoopAvx2, repeats, kIterations);
    peaks.int8_signed_isa = "AVX2 vpsignb + vpmaddubsw";
  } else {
    peaks.int8_signed_dot_ops = peaks.int8_dot_ops;
    peaks.int8_signed_isa = peaks.int8_isa;
  }
  return peaks;
}

}  // namespace crossreg::cpu
