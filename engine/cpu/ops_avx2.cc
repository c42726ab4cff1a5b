// AVX2 + FMA versions of the attention's per-key operations (engine/cpu/ops.h): a
// query-key dot product and a probability-weighted value accumulation, f32 or bf16
// cache; and of softmax and SwiGLU. Without them an AVX2 CPU would run the portable
// loops, which make attention the largest cost of a prefill there. Compiled with -mavx2
// -mfma; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "engine/cpu/exp_avx2.h"
#include "engine/cpu/ops.h"

namespace crossreg::cpu::internal {
namespace {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {  // bf16 widened to f32
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float ToF32(float v) { return v; }
inline float ToF32(uint16_t v) { return Bf16ToF32(v); }

// The cache's element type T: float or bf16 bits.
template <typename T>
float DotWith(const float* a, const T* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), Load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), Load8(b + i + 8), acc1);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * ToF32(b[i]);
  return HorizontalSum(_mm256_add_ps(acc0, acc1)) + tail;
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Lanes [0, count) set, for a tail of count < 8 elements.
inline __m256 TailMask(int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes));
}

template <typename T>
void AxpyWith(float* out, float p, const T* v, int64_t n) {
  const __m256 vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(vp, Load8(v + i), _mm256_loadu_ps(out + i)));
  }
  for (; i < n; ++i) out[i] += p * ToF32(v[i]);
}

}  // namespace

void SwiGluAvx2(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i mask = _mm256_castps_si256(TailMask(std::min<int64_t>(8, n - i)));
    const __m256 g = _mm256_maskload_ps(gate + i, mask);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, ExpAvx2(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_maskstore_ps(gate + i, mask, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, mask)));
  }
}

// Whole vectors take plain loads and stores, the last partial one masked ones: the same
// lanes meet the same operations in the same order as with every vector masked (a
// masked-off lane adds 0 to the sum, -inf to the max), so the bits are those of a
// masked loop, at a fraction of its cost (masked moves and blends were half of an
// attention row's softmax on a Zen 1 class core).
void SoftmaxAvx2(float* x, int64_t n) {
  const int64_t whole = n / 8 * 8;
  const __m256 tail = TailMask(n - whole);
  const __m256i tail_i = _mm256_castps_si256(tail);
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < whole; i += 8) mx = _mm256_max_ps(_mm256_loadu_ps(x + i), mx);
  if (whole < n) {
    mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + whole, tail_i), tail));
  }
  const __m256 max = _mm256_set1_ps(HorizontalMax(mx));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < whole; i += 8) {
    const __m256 e = ExpAvx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), max));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (whole < n) {
    const __m256 e = _mm256_and_ps(tail, ExpAvx2(_mm256_sub_ps(_mm256_maskload_ps(x + whole, tail_i), max)));
    _mm256_maskstore_ps(x + whole, tail_i, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / HorizontalSum(sum));
  for (int64_t i = 0; i < whole; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  if (whole < n) _mm256_maskstore_ps(x + whole, tail_i, _mm256_mul_ps(_mm256_maskload_ps(x + whole, tail_i), inv));
}

// ArgmaxAvx512's two passes on 8 lanes (a greedy row's 16,384-32,000 logits were scanned
// one compare at a time: 1.5% of a greedy decode of the default model on AVX2).
int32_t ArgmaxAvx2(const float* x, int64_t n) {
  if (n <= 0 || std::isnan(x[0])) return 0;
  // Pass 1: the largest non-NaN value (vmaxps returns its second operand when the first
  // is NaN, so a NaN element leaves the running maximum as it was).
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(_mm256_loadu_ps(x + i), mx);
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  float best = _mm_cvtss_f32(m);
  for (int64_t t = i; t < n; ++t) best = x[t] > best ? x[t] : best;  // NaN compares false
  // Pass 2: its first occurrence (equal values, +0 and -0 alike, never replace an earlier
  // one). With every element -inf or NaN the maximum is -inf, first found at 0.
  const __m256 want = _mm256_set1_ps(best);
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), want, _CMP_EQ_OQ));
    if (eq != 0) return static_cast<int32_t>(i + __builtin_ctz(static_cast<unsigned>(eq)));
  }
  for (; i < n; ++i) {
    if (x[i] == best) return static_cast<int32_t>(i);
  }
  return 0;
}

float DotAvx2(const float* a, const float* b, int64_t n) { return DotWith(a, b, n); }
float DotBf16Avx2(const float* a, const uint16_t* b, int64_t n) { return DotWith(a, b, n); }
void AxpyAvx2(float* out, float p, const float* v, int64_t n) { AxpyWith(out, p, v, n); }
void AxpyBf16Avx2(float* out, float p, const uint16_t* v, int64_t n) { AxpyWith(out, p, v, n); }

}  // namespace crossreg::cpu::internal
