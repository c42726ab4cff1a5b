// The AVX2 attention path behind engine/cpu/paged_attention.h, for the CPU backend's
// block-transposed cache: one head and up to 4 rows at a time, 8 cached keys scored per vector
// straight from the cache's key lanes (no copy of a key into a row), and the weighted
// sum of values kept in registers over the attended positions. Compiled with -mavx2
// -mfma; called only after run-time detection.
//
// Up to kMaxGroupRows rows of one sequence run together, sharing each key and value
// load (a prefill's or a verify step's rows; alone, a row's kernel is load-bound).
//
// Invariance (lossless = AR rests on it): a key's score is one FMA chain over the head
// elements in order, whether the key is in a full group of 8 (a vector lane), in a
// block's tail or a predictive row's own key (std::fma, the same operation), so a score
// never depends on the position's place in a block or on which rows share the forward;
// the value sum takes the positions in order, whichever rows share the pass. A row's result
// is the same in any batch and any group.
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

// Output elements summed per pass of the value sum: G x kPassElements / 8 accumulators
// stay in registers.
template <int G>
constexpr int kPassElements = G == 1 ? 64 : G == 2 ? 32 : 16;
// Groups of 8 keys scored at once per row: independent FMA chains hide their latency,
// G x kKeyGroups accumulators.
template <int G>
constexpr int kKeyGroups = G == 1 ? 4 : G == 2 ? 4 : 2;

// Rows [r0, r0 + G) of one sequence (one block table) and head h. The rows share each
// key and value load; each row's arithmetic is the one-row kernel's, in the same order.
template <typename T, int G>
void Attend(const PagedAttentionArgs& a, int64_t r0, int h, std::vector<float>& scratch) {
  const int hd = a.head_dim, bs = a.block_size;
  const int kv_head = h / (a.num_heads / a.num_kv_heads);
  const int64_t kv_dim = int64_t{a.num_kv_heads} * hd, kv_off = int64_t{kv_head} * hd;
  const int32_t* table = a.block_tables + a.table_offset[r0];
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  auto key_lanes = [&](int64_t t) {  // key element d of position t at [d * bs]
    return k_cache + (int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * hd * bs + t % bs;
  };
  auto value_row = [&](int64_t t) {
    return v_cache + ((int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * bs + t % bs) * hd;
  };
  const float* q[G];
  int64_t n_cached[G], n[G];
  int64_t max_cached = 0, min_cached = INT64_MAX, max_n = 0;
  for (int i = 0; i < G; ++i) {
    const int64_t r = r0 + i;
    q[i] = a.q + r * a.q_stride + int64_t{h} * hd;
    n_cached[i] = a.num_cached[r];
    n[i] = n_cached[i] + a.num_own[r];
    max_cached = std::max(max_cached, n_cached[i]);
    min_cached = std::min(min_cached, n_cached[i]);
    max_n = std::max(max_n, n[i]);
  }
  scratch.resize(static_cast<size_t>(G * max_n));
  float* s[G];
  for (int i = 0; i < G; ++i) s[i] = scratch.data() + i * max_n;
  const __m256 scale = _mm256_set1_ps(a.scale);

  // Cached keys: full groups of 8 inside a block up to the longest row's context, scored
  // for every row (a row past its own context scores keys it then ignores).
  thread_local std::vector<int64_t> groups;  // first position of each full group
  groups.clear();
  for (int64_t t = 0; t < max_cached; t += bs) {
    const int64_t count = std::min<int64_t>(bs, max_cached - t);
    for (int64_t j = 0; j + 8 <= count; j += 8) groups.push_back(t + j);
  }
  constexpr int KG = kKeyGroups<G>;
  size_t g = 0;
  for (; g + KG <= groups.size(); g += KG) {
    __m256 acc[G][KG];
    const T* k[KG];
    for (int j = 0; j < KG; ++j) k[j] = key_lanes(groups[g + j]);
    for (int i = 0; i < G; ++i)
      for (int j = 0; j < KG; ++j) acc[i][j] = _mm256_setzero_ps();
    for (int d = 0; d < hd; ++d) {
      __m256 kd[KG];
      for (int j = 0; j < KG; ++j) kd[j] = Load8(k[j] + int64_t{d} * bs);
      for (int i = 0; i < G; ++i) {
        const __m256 qd = _mm256_broadcast_ss(q[i] + d);
        for (int j = 0; j < KG; ++j) acc[i][j] = _mm256_fmadd_ps(qd, kd[j], acc[i][j]);
      }
    }
    for (int i = 0; i < G; ++i)
      for (int j = 0; j < KG; ++j) _mm256_storeu_ps(s[i] + groups[g + j], _mm256_mul_ps(acc[i][j], scale));
  }
  for (; g < groups.size(); ++g) {
    __m256 acc[G];
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    const T* k = key_lanes(groups[g]);
    for (int d = 0; d < hd; ++d) {
      const __m256 kd = Load8(k + int64_t{d} * bs);
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[i] + d), kd, acc[i]);
    }
    for (int i = 0; i < G; ++i) _mm256_storeu_ps(s[i] + groups[g], _mm256_mul_ps(acc[i], scale));
  }
  for (int i = 0; i < G; ++i) {
    // The last block's tail (positions not in a full group of 8), one FMA chain each.
    for (int64_t t0 = 0; t0 < n_cached[i]; t0 += bs) {
      const int64_t full = std::min<int64_t>(bs, max_cached - t0) / 8 * 8;
      const int64_t count = std::min<int64_t>(bs, n_cached[i] - t0);
      for (int64_t j = full; j < count; ++j) {
        const T* k = key_lanes(t0 + j);
        float acc = 0.0f;
        for (int d = 0; d < hd; ++d) acc = std::fma(q[i][d], ToF32(k[int64_t{d} * bs]), acc);
        s[i][t0 + j] = acc * a.scale;
      }
    }
    // A predictive row's own keys (f32, contiguous), the same chain.
    const int64_t r = r0 + i;
    for (int64_t t = n_cached[i]; t < n[i]; ++t) {
      const float* k = a.pred_k + int64_t{a.group_rows[a.group_begin[r] + (t - n_cached[i])]} * kv_dim + kv_off;
      float acc = 0.0f;
      for (int d = 0; d < hd; ++d) acc = std::fma(q[i][d], k[d], acc);
      s[i][t] = acc * a.scale;
    }
    Softmax(s[i], n[i]);
  }

  // out = sum over positions, in order, of p_t * v_t: the positions every row attends
  // together, then each row's own remainder.
  constexpr int P = kPassElements<G>;
  constexpr int V = P / 8;
  for (int c0 = 0; c0 < hd; c0 += P) {
    __m256 acc[G][V];
    for (int i = 0; i < G; ++i)
      for (int e = 0; e < V; ++e) acc[i][e] = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t < min_cached; ++t) {
      const T* v = value_row(t) + c0;
      __m256 ve[V];
      for (int e = 0; e < V; ++e) ve[e] = Load8(v + 8 * e);
      for (int i = 0; i < G; ++i) {
        const __m256 p = _mm256_broadcast_ss(s[i] + t);
        for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, ve[e], acc[i][e]);
      }
    }
    for (int i = 0; i < G; ++i) {
      const int64_t r = r0 + i;
      for (int64_t u = t; u < n_cached[i]; ++u) {
        const __m256 p = _mm256_set1_ps(s[i][u]);
        const T* v = value_row(u) + c0;
        for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, Load8(v + 8 * e), acc[i][e]);
      }
      for (int64_t u = n_cached[i]; u < n[i]; ++u) {
        const __m256 p = _mm256_set1_ps(s[i][u]);
        const float* v =
            a.pred_v + int64_t{a.group_rows[a.group_begin[r] + (u - n_cached[i])]} * kv_dim + kv_off + c0;
        for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8 * e), acc[i][e]);
      }
      float* out = a.out + r * a.out_stride + int64_t{h} * hd;
      for (int e = 0; e < V; ++e) _mm256_storeu_ps(out + c0 + 8 * e, acc[i][e]);
    }
  }
}

template <typename T>
void AttendGroup(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch) {
  switch (count) {
    case 4: return Attend<T, 4>(a, r0, h, scratch);
    case 3: return Attend<T, 3>(a, r0, h, scratch);
    case 2: return Attend<T, 2>(a, r0, h, scratch);
    default: return Attend<T, 1>(a, r0, h, scratch);
  }
}

}  // namespace

bool AttendRowsAvx2(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch) {
  if (a.kv_layout != KvLayout::kBlockTransposed || a.head_dim % 64 != 0 || a.block_size % 8 != 0) return false;
  if (a.cache_element == KvElement::kBf16) {
    AttendGroup<uint16_t>(a, r0, count, h, scratch);
  } else {
    AttendGroup<float>(a, r0, count, h, scratch);
  }
  return true;
}

}  // namespace crossreg::cpu::internal
