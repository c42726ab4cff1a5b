// The AVX2 attention path behind engine/cpu/paged_attention.h, for the CPU backend's
// block-transposed cache: one row and head at a time, 8 cached keys scored per vector
// straight from the cache's key lanes (no copy of a key into a row), and the weighted
// sum of values kept in registers over the attended positions. Compiled with -mavx2
// -mfma; called only after run-time detection.
//
// Invariance (lossless = AR rests on it): a key's score is one FMA chain over the head
// elements in order, whether the key is in a full group of 8 (a vector lane), in a
// block's tail or a predictive row's own key (std::fma, the same operation), so a score
// never depends on the position's place in a block or on which rows share the forward;
// the value sum takes the positions in order. A row's result is the same in any batch.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cpu/paged_attention_internal.h"
#include "engine/dtype.h"

namespace crossreg::cpu::internal {
namespace {

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {  // bf16 widened to f32
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float ToF32(float v) { return v; }
inline float ToF32(uint16_t v) { return Bf16ToF32(v); }

// Head elements summed per pass: 8 accumulators of 8 lanes.
constexpr int kPassElements = 64;
// Groups of 8 keys scored at once: independent FMA chains hide their latency.
constexpr int kKeyGroups = 4;

template <typename T>
void Attend(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scratch) {
  const int hd = a.head_dim, bs = a.block_size;
  const int kv_head = h / (a.num_heads / a.num_kv_heads);
  const int64_t kv_dim = int64_t{a.num_kv_heads} * hd, kv_off = int64_t{kv_head} * hd;
  const float* q = a.q + r * a.q_stride + int64_t{h} * hd;
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  auto key_lanes = [&](int64_t t) {  // key element d of position t at [d * bs]
    return k_cache + (int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * hd * bs + t % bs;
  };
  auto value_row = [&](int64_t t) {
    return v_cache + ((int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * bs + t % bs) * hd;
  };
  auto own_row = [&](int64_t t) { return int64_t{a.group_rows[a.group_begin[r] + (t - n_cached)]}; };
  scratch.resize(static_cast<size_t>(n));
  float* s = scratch.data();
  const __m256 scale = _mm256_set1_ps(a.scale);

  // Cached keys: full groups of 8 inside a block, kKeyGroups groups at a time.
  thread_local std::vector<int64_t> groups;  // first position of each full group
  groups.clear();
  int64_t t = 0;
  for (; t < n_cached; t += bs) {
    const int64_t count = std::min<int64_t>(bs, n_cached - t);
    for (int64_t j = 0; j + 8 <= count; j += 8) groups.push_back(t + j);
  }
  size_t g = 0;
  for (; g + kKeyGroups <= groups.size(); g += kKeyGroups) {
    __m256 acc[kKeyGroups];
    const T* k[kKeyGroups];
    for (int i = 0; i < kKeyGroups; ++i) {
      acc[i] = _mm256_setzero_ps();
      k[i] = key_lanes(groups[g + i]);
    }
    for (int d = 0; d < hd; ++d) {
      const __m256 qd = _mm256_set1_ps(q[d]);
      for (int i = 0; i < kKeyGroups; ++i) acc[i] = _mm256_fmadd_ps(qd, Load8(k[i] + int64_t{d} * bs), acc[i]);
    }
    for (int i = 0; i < kKeyGroups; ++i) _mm256_storeu_ps(s + groups[g + i], _mm256_mul_ps(acc[i], scale));
  }
  for (; g < groups.size(); ++g) {
    __m256 acc = _mm256_setzero_ps();
    const T* k = key_lanes(groups[g]);
    for (int d = 0; d < hd; ++d) acc = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), Load8(k + int64_t{d} * bs), acc);
    _mm256_storeu_ps(s + groups[g], _mm256_mul_ps(acc, scale));
  }
  // Blocks' tails (positions not in a full group of 8), one FMA chain each.
  for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
    const int64_t count = std::min<int64_t>(bs, n_cached - t0);
    for (int64_t j = count / 8 * 8; j < count; ++j) {
      const T* k = key_lanes(t0 + j);
      float acc = 0.0f;
      for (int d = 0; d < hd; ++d) acc = std::fma(q[d], ToF32(k[int64_t{d} * bs]), acc);
      s[t0 + j] = acc * a.scale;
    }
  }
  // A predictive row's own keys (f32, contiguous), the same chain.
  for (t = n_cached; t < n; ++t) {
    const float* k = a.pred_k + own_row(t) * kv_dim + kv_off;
    float acc = 0.0f;
    for (int d = 0; d < hd; ++d) acc = std::fma(q[d], k[d], acc);
    s[t] = acc * a.scale;
  }

  Softmax(s, n);

  // out = sum over positions, in order, of p_t * v_t, 64 head elements a pass.
  float* out = a.out + r * a.out_stride + int64_t{h} * hd;
  for (int c0 = 0; c0 < hd; c0 += kPassElements) {
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (t = 0; t < n_cached; ++t) {
      const __m256 p = _mm256_set1_ps(s[t]);
      const T* v = value_row(t) + c0;
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(p, Load8(v + 8 * i), acc[i]);
    }
    for (; t < n; ++t) {
      const __m256 p = _mm256_set1_ps(s[t]);
      const float* v = a.pred_v + own_row(t) * kv_dim + kv_off + c0;
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8 * i), acc[i]);
    }
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out + c0 + 8 * i, acc[i]);
  }
}

}  // namespace

bool AttendRowAvx2(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scratch) {
  if (a.kv_layout != KvLayout::kBlockTransposed || a.head_dim % kPassElements != 0 || a.block_size % 8 != 0) {
    return false;
  }
  if (a.cache_element == KvElement::kBf16) {
    Attend<uint16_t>(a, r, h, scratch);
  } else {
    Attend<float>(a, r, h, scratch);
  }
  return true;
}

}  // namespace crossreg::cpu::internal
