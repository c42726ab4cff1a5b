// e^x for 8 lanes, for the AVX2 files only (include it from *_avx2.cc, which are compiled
// with -mavx2 -mfma). Softmax and SiLU use it: the portable path's libm exp, one call an
// element, made them about a sixth of an AVX2 host's prefill.
#pragma once

#include <immintrin.h>

namespace crossreg::cpu::internal {
// Internal linkage: each AVX2 file gets its own copy, so an inline function built with
// AVX2 flags is never merged into code that runs on a CPU without them.
namespace {

// The AVX-512 version's method (exp_avx512.h): x = n·ln2 + r with |r| <= ln2/2, e^r by a
// degree-6 polynomial (error < 2e-7 relative), 2^n built in the exponent bits. Inputs
// are clamped to [-87.3, 88]: below, the result is the smallest normal float's order
// (softmax and SiLU read it as 0); above, e^88 (1.6e38) stays finite, so 2^n never
// needs the exponent 128 that AVX2 has no scalef to reach.
inline __m256 ExpAvx2(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 127]: 2^n is the float with biased exponent n + 127.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

}  // namespace
}  // namespace crossreg::cpu::internal
