// The bf16 dot-product peak loop (engine/cpu/compute_peak.h), compiled for AVX512_BF16.
#include <immintrin.h>

#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {

double DotBf16LoopAvx512Bf16(int64_t iterations) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a00);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  PeakSink() = _mm512_reduce_add_ps(sum);
  return static_cast<double>(iterations) * 24 * 32 * 2;
}

}  // namespace crossreg::cpu::internal
