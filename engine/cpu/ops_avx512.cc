// AVX-512 versions of the per-row ops (engine/cpu/ops.h), with a vectorised exp.
// Compiled with -mavx512f etc.; called only after run-time detection. Tails use
// masked loads, so there is one code path per op whatever n is.
#include <immintrin.h>

#include <cmath>

#include "engine/cpu/exp_avx512.h"
#include "engine/cpu/ops.h"

namespace crossreg::cpu::internal {
namespace {

inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

inline __m512 LoadBf16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

}  // namespace

void RmsNormAvx512(const float* x, const float* weight, int64_t n, float eps, float* out) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  const float scale = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / static_cast<float>(n) + eps);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, weight + i), v));
  }
}

void RopeAvx512(float* vec, int num_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* v = vec + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; i += 16) {
      const __mmask16 m = TailMask(half - i);
      const __m512 x0 = _mm512_maskz_loadu_ps(m, v + i), x1 = _mm512_maskz_loadu_ps(m, v + half + i);
      const __m512 c = _mm512_maskz_loadu_ps(m, cos + i), s = _mm512_maskz_loadu_ps(m, sin + i);
      _mm512_mask_storeu_ps(v + i, m, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
      _mm512_mask_storeu_ps(v + half + i, m, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
    }
  }
}

void SwiGluAvx512(float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, ExpAvx512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void SoftmaxAvx512(float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), TailMask(n - i), x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, ExpAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max)));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

float DotAvx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float DotBf16Avx512(const float* a, const uint16_t* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), LoadBf16(b + i, m), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void AxpyAvx512(float* out, float p, const float* v, int64_t n) {
  const __m512 pv = _mm512_set1_ps(p);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m,
                          _mm512_fmadd_ps(pv, _mm512_maskz_loadu_ps(m, v + i), _mm512_maskz_loadu_ps(m, out + i)));
  }
}

void AxpyBf16Avx512(float* out, float p, const uint16_t* v, int64_t n) {
  const __m512 pv = _mm512_set1_ps(p);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_fmadd_ps(pv, LoadBf16(v + i, m), _mm512_maskz_loadu_ps(m, out + i)));
  }
}

void AddInPlaceAvx512(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, out + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

int32_t ArgmaxAvx512(const float* x, int64_t n) {
  // The scan keeps index 0 when nothing compares above x[0], which a NaN there never does.
  if (n <= 0 || std::isnan(x[0])) return 0;
  // Pass 1: the largest non-NaN value. vmaxps returns its second operand when the first
  // is NaN, so a NaN element leaves the running maximum as it was.
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 mx = minus_inf;
  for (int64_t i = 0; i < n; i += 16) mx = _mm512_max_ps(_mm512_mask_loadu_ps(minus_inf, TailMask(n - i), x + i), mx);
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  // Pass 2: its first occurrence, which is where the scan stops moving (equal values,
  // +0 and -0 alike, never replace an earlier one). With every element -inf or NaN the
  // maximum is -inf, first found at 0 (x[0] is not NaN here).
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(TailMask(n - i), _mm512_maskz_loadu_ps(TailMask(n - i), x + i), max,
                                                 _CMP_EQ_OQ);
    if (eq != 0) return static_cast<int32_t>(i + __builtin_ctz(eq));
  }
  return 0;
}

}  // namespace crossreg::cpu::internal
