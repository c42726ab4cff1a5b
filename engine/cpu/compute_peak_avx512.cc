// The f32 FMA peak loop (engine/cpu/compute_peak.h), compiled for AVX-512.
#include <immintrin.h>

#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {

double FmaLoopAvx512(int64_t iterations) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  PeakSink() = _mm512_reduce_add_ps(sum);  // keeps the loop observable
  return static_cast<double>(iterations) * 24 * 16 * 2;
}

}  // namespace crossreg::cpu::internal
