// e^x for 16 lanes, for the AVX-512 files only (include it from *_avx512.cc, which are
// compiled with -mavx512f). Softmax (ops, attention) and SiLU use it.
#pragma once

#include <immintrin.h>

namespace crossreg::cpu::internal {
// Internal linkage: each AVX-512 file gets its own copy, so an inline function built
// with AVX-512 flags is never merged into code that runs on a CPU without them.
namespace {

// x = n·ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial (Taylor, error < 2e-7
// relative on the interval), 2^n by exponent arithmetic. Inputs below -87.3 give 0 and
// above 88.7 saturate, as softmax and SiLU need.
inline __m512 ExpAvx512(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n·ln2 in two steps (Cody-Waite) to keep r's low bits.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);  // p · 2^n
}

}  // namespace
}  // namespace crossreg::cpu::internal
