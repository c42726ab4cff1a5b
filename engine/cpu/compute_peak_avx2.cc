// The AVX2 peak loops (engine/cpu/compute_peak.h): f32 FMA and the 8-bit dot products
// the quantized kernels run (vpmaddubsw pairs, vpmaddwd into int32; signed codes with a
// vpsignb beside each product), compiled for AVX2.
#include <immintrin.h>

#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {

double FmaLoopAvx2(int64_t iterations) {
  // 12 chains: Zen 3 and recent Intel cores retire two 4-cycle FMAs a cycle (8 in flight);
  // 12 leave headroom without spilling the 16 registers.
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  PeakSink() = lanes[0] + lanes[7];
  return static_cast<double>(iterations) * 12 * 8 * 2;
}

double DotInt8LoopAvx2(int64_t iterations) {
  // The quantized kernels' inner step: unsigned x signed bytes to int16 pairs, pairs to
  // int32 sums, added into accumulators; 32 multiply-adds per step.
  // `a` moves every iteration, so the products cannot be hoisted out of the loop, and
  // every chain has its own `b`, so no two chains share a product the compiler could
  // compute once.
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi8(3);
  const __m256i step = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
  __m256i b[8];
  for (int i = 0; i < 8; ++i) b[i] = _mm256_set1_epi8(static_cast<char>(i - 4));
  for (int64_t it = 0; it < iterations; ++it) {
    a = _mm256_add_epi8(a, step);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[i]), ones));
    }
  }
  __m256i sum = acc[0];
  for (int i = 1; i < 8; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  PeakSink() = static_cast<float>(_mm256_extract_epi32(sum, 0) + _mm256_extract_epi32(sum, 7));
  return static_cast<double>(iterations) * 8 * 32 * 2;
}

double DotInt8SignedLoopAvx2(int64_t iterations) {
  // The step of signed codes (Q8_0, IQ4_NL, IQ4_XS) on the AVX2 kernel: vpmaddubsw takes
  // one unsigned operand, so the weights enter as |w| (one vpabsb a step, shared by the
  // rows) and each row's bytes through vpsignb with w; then the pairs and sums as above.
  // `a` plays the weights, each chain's `b` a row.
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a = _mm256_set1_epi8(3);
  const __m256i step = _mm256_set1_epi8(-7), ones = _mm256_set1_epi16(1);
  __m256i b[8];
  for (int i = 0; i < 8; ++i) b[i] = _mm256_set1_epi8(static_cast<char>(i - 4));
  for (int64_t it = 0; it < iterations; ++it) {
    a = _mm256_add_epi8(a, step);
    const __m256i magnitude = _mm256_abs_epi8(a);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(b[i], a));
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(pairs, ones));
    }
  }
  __m256i sum = acc[0];
  for (int i = 1; i < 8; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  PeakSink() = static_cast<float>(_mm256_extract_epi32(sum, 0) + _mm256_extract_epi32(sum, 7));
  return static_cast<double>(iterations) * 8 * 32 * 2;
}

}  // namespace crossreg::cpu::internal
