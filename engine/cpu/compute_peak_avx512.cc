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

namespace crossreg::cpu::internal {

double DotInt8LoopAvx512(int64_t iterations) {
  // As the AVX2 loop, 64 multiply-adds per step.
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(3);
  const __m512i step = _mm512_set1_epi8(1), ones = _mm512_set1_epi16(1);
  __m512i b[12];  // one per chain: no product shared between chains
  for (int i = 0; i < 12; ++i) b[i] = _mm512_set1_epi8(static_cast<char>(i - 6));
  for (int64_t it = 0; it < iterations; ++it) {
    a = _mm512_add_epi8(a, step);
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      acc[i] = _mm512_add_epi32(acc[i], _mm512_madd_epi16(_mm512_maddubs_epi16(a, b[i]), ones));
    }
  }
  __m512i sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  PeakSink() = static_cast<float>(_mm512_reduce_add_epi32(sum));
  return static_cast<double>(iterations) * 12 * 64 * 2;
}

}  // namespace crossreg::cpu::internal
