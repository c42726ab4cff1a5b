// AVX-512 attention of one (row, head) for head_dim a multiple of 8 up to 256: the query
// and the output accumulator stay in registers across every attended position (no
// per-position stores); keys are scored in place from the paged cache (f32 or bf16),
// 16 positions per vector op when the block is laid out keys-in-lanes.
// Compiled with -mavx512f etc.; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "engine/cpu/exp_avx512.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/paged_attention_internal.h"

namespace crossreg::cpu::internal {
namespace {

// Loads of 16 head elements; `m` masks the last vector of a head_dim that is not a
// multiple of 16 (head_dim 8: one half-vector).
inline __m512 Load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 Load16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
inline float ToFloat(float v) { return v; }
inline float ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}
template <int NV>
inline __mmask16 MaskOf(int i, __mmask16 last) {
  return i == NV - 1 ? last : __mmask16(0xffff);
}

template <int NV, typename KeyT>
inline float DotQ(const __m512 (&q)[NV], const KeyT* k, __mmask16 last) {
  __m512 a = _mm512_mul_ps(q[0], Load16(k, MaskOf<NV>(0, last)));
  __m512 b = _mm512_setzero_ps();
  for (int i = 1; i < NV; ++i) {
    if (i % 2) {
      b = _mm512_fmadd_ps(q[i], Load16(k + 16 * i, MaskOf<NV>(i, last)), b);
    } else {
      a = _mm512_fmadd_ps(q[i], Load16(k + 16 * i, MaskOf<NV>(i, last)), a);
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}

// Lanes [0, n) of a vector (n clamped to [0, 16]).
inline __mmask16 LanesBelow(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1u);
}

// Row r's query for head h, times the softmax scale, as the keys-in-lanes scores read it.
inline void ScaledQuery(const PagedAttentionArgs& a, int64_t r, int h, float* qs) {
  const float* qp = a.q + r * a.q_stride + static_cast<int64_t>(h) * a.head_dim;
  for (int d = 0; d < a.head_dim; ++d) qs[d] = qp[d] * a.scale;
}

// Blocks of the paged cache asked for ahead of the one being read. After a forward has
// streamed the weights, a layer's K/V are in DRAM, and one head's walk over its blocks
// (a dependent chain per block) would wait on each miss in turn: asking a few blocks
// ahead keeps the misses in flight together.
inline constexpr int64_t kPrefetchBlocks = 4;

// Every cache line of one (block, kv head) of K or V: head_dim x block_size elements,
// contiguous in the block-transposed layout.
template <typename T>
inline void PrefetchBlock(const PagedAttentionArgs& a, const T* cache, const int32_t* table, int kv_head,
                          int64_t block_index, int hint) {
  const int64_t elements = int64_t{a.head_dim} * a.block_size;
  const char* p = reinterpret_cast<const char*>(cache + (int64_t{table[block_index]} * a.num_kv_heads + kv_head) * elements);
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(T));
  for (int64_t off = 0; off < bytes; off += 64) {
    if (hint == _MM_HINT_T0) {
      _mm_prefetch(p + off, _MM_HINT_T0);
    } else {
      _mm_prefetch(p + off, _MM_HINT_T1);
    }
  }
}

// Scores of R rows against V vectors of 16 keys each, keys t .. t + 16V (col[v]: element
// d of vector v's keys at col[v] + d * bs), one FMA chain per (row, vector) over d in
// order, stored for each row's own keys (s[i][t...], lanes below n_cached[i]). R x V
// accumulators in registers (16 to 24), each key vector loaded once for every row: the
// chains hide the FMA latency, and a step loads V vectors and R query elements for R x V
// FMAs.
template <int R, int V, typename T>
inline void ScoreVectors(const T* const* col, const __mmask16* m, int hd, int bs, const float (*qs)[256], int64_t t,
                         const int64_t* n_cached, float* const* s) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int d = 0; d < hd; ++d) {
    __m512 k[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) k[v] = Load16(col[v] + int64_t{d} * bs, m[v]);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512 q = _mm512_set1_ps(qs[i][d]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(q, k[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      const __mmask16 mi = LanesBelow(n_cached[i] - (t + 16 * v));
      if (mi != 0) _mm512_mask_storeu_ps(s[i] + t + 16 * v, mi, acc[i][v]);
    }
  }
}

// ScoreVectors for the step's `vectors` (1 to V) vectors of keys.
template <int R, int V, typename T>
inline void ScoreUpTo(int vectors, const T* const* col, const __mmask16* m, int hd, int bs, const float (*qs)[256],
                      int64_t t, const int64_t* n_cached, float* const* s) {
  if constexpr (V > 1) {
    if (vectors < V) return ScoreUpTo<R, V - 1, T>(vectors, col, m, hd, bs, qs, t, n_cached, s);
  }
  ScoreVectors<R, V, T>(col, m, hd, bs, qs, t, n_cached, s);
}

// Cached scores of up to kMaxGroupRows rows of one sequence (one block table) for one
// head, keys in lanes, four vectors of 16 keys at a time for up to 4 rows, three up to 8
// and two up to 12 (ScoreVectors; 24 accumulators at 8 and 12 rows). Row i's lanes
// see exactly the per-row arithmetic (the same chain over d for each of its keys,
// whichever vectors share the step), so its scores do not depend on which rows share
// the call; lanes past a row's own keys are computed but never stored. With
// `prefetch`, the keys are asked for a few blocks ahead and the values (to L2) as their
// blocks are scored: the first pass over a head's cache after a forward has streamed
// the weights finds it in DRAM.
template <int R>
inline constexpr int kScoreVectors = R > 8 ? 2 : R > 4 ? 3 : 4;
// Positions [t_begin, t_end) only (t_begin a multiple of 16 x kScoreVectors<R>): a
// unit's scores split between the threads.
template <int R, typename T>
void ScoreCachedRows(const PagedAttentionArgs& a, const int32_t* table, int kv_head, const int64_t* n_cached,
                     const float (*qs)[256], float* const* s, bool prefetch, int64_t t_begin = 0,
                     int64_t t_end = INT64_MAX) {
  const int hd = a.head_dim;
  const int bs = a.block_size;
  int64_t n_max = 0;
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) n_max = std::max(n_max, n_cached[i]);
  const T* kt = static_cast<const T*>(a.k_cache);
  const T* vt = static_cast<const T*>(a.v_cache);
  const int64_t t_stop = std::min(n_max, t_end);
  const int64_t blocks = (t_stop + bs - 1) / bs;
  int64_t keys_prefetched = t_begin / bs, values_prefetched = t_begin / bs;  // blocks asked for so far
  constexpr int kVectors = kScoreVectors<R>;
  for (int64_t t = t_begin; t < t_stop; t += 16 * kVectors) {
    if (prefetch) {
      const int64_t last_block = (std::min(t_stop, t + 16 * kVectors) - 1) / bs;
      for (; keys_prefetched < std::min(blocks, last_block + 1 + kPrefetchBlocks); ++keys_prefetched) {
        PrefetchBlock(a, kt, table, kv_head, keys_prefetched, _MM_HINT_T0);
      }
      for (; values_prefetched <= last_block; ++values_prefetched) {
        PrefetchBlock(a, vt, table, kv_head, values_prefetched, _MM_HINT_T1);
      }
    }
    const T* col[kVectors];
    __mmask16 m[kVectors];
    int vectors = 0;
    for (; vectors < kVectors && t + 16 * vectors < t_stop; ++vectors) {
      const int64_t tv = t + 16 * vectors;
      col[vectors] = kt + ((int64_t{table[tv / bs]} * a.num_kv_heads + kv_head) * hd) * bs + tv % bs;
      m[vectors] = LanesBelow(n_max - tv);
    }
    ScoreUpTo<R, kVectors, T>(vectors, col, m, hd, bs, qs, t, n_cached, s);
  }
}

// Σ_t p_i[t] · V[t] over cached positions [t_begin, t_end) of R rows (one sequence, one
// head), values laid out a position's head slice contiguous (kBlockTransposed), head
// elements in lanes: each value vector is loaded once for every row, and row i's
// accumulators take one FMA per position, in order, from zero (or from `out`, where an
// earlier stretch left them: carry_in), whichever rows share the call, so its result does
// not depend on them. R x NV accumulators stay in registers (at most
// kValueAccumulators<NV>). t_begin is a multiple of the block size.
template <int NV>
inline constexpr int kValueAccumulators = NV <= 4 ? 24 : 16;  // beside NV value vectors
template <int R, int NV, typename T>
void SumValuesRows(const PagedAttentionArgs& a, const int32_t* table, int kv_head, const int64_t* n_cached,
                   const float* const* p, __mmask16 last, float (*out)[256], int64_t t_begin, int64_t t_end,
                   bool carry_in, int e0) {
  static_assert(R * NV <= kValueAccumulators<NV>);
  const int64_t hd = a.head_dim;
  const int64_t bs = a.block_size;
  const T* vt = static_cast<const T*>(a.v_cache) + int64_t{kv_head} * bs * hd + e0;
  const int64_t block_elements = int64_t{a.num_kv_heads} * bs * hd;
  int64_t n_max = n_cached[0], n_min = n_cached[0];
  for (int i = 1; i < R; ++i) {
    n_max = std::max(n_max, n_cached[i]);
    n_min = std::min(n_min, n_cached[i]);
  }
  t_end = std::min(t_end, n_max);
  __m512 o[R][NV];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      o[i][v] = carry_in ? _mm512_maskz_loadu_ps(MaskOf<NV>(v, last), out[i] + e0 + 16 * v) : _mm512_setzero_ps();
    }
  }
  // One position's values into every row that attends it (all rows below n_min: no
  // per-row test there, which was a compare and a branch per row and position).
  auto position = [&](const T* vb, int64_t t, bool all_rows) {
    __m512 v[NV];
#pragma GCC unroll 16
    for (int k = 0; k < NV; ++k) v[k] = Load16(vb + t * hd + 16 * k, MaskOf<NV>(k, last));
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      if (!all_rows && t >= n_cached[i]) continue;  // past this row's own positions (a later row's)
      const __m512 pt = _mm512_set1_ps(p[i][t]);
#pragma GCC unroll 16
      for (int k = 0; k < NV; ++k) o[i][k] = _mm512_fmadd_ps(pt, v[k], o[i][k]);
    }
  };
  for (int64_t t0 = t_begin; t0 < t_end; t0 += bs) {
    const T* vb = vt + int64_t{table[t0 / bs]} * block_elements - t0 * hd;
    const int64_t t1 = std::min(t_end, t0 + bs);
    const int64_t all_end = std::clamp(n_min, t0, t1);
    for (int64_t t = t0; t < all_end; ++t) position(vb, t, true);
    for (int64_t t = all_end; t < t1; ++t) position(vb, t, false);
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < NV; ++k) _mm512_mask_storeu_ps(out[i] + e0 + 16 * k, MaskOf<NV>(k, last), o[i][k]);
  }
}

// Positions a group's passes take in turn (rounded to whole blocks): the passes of more
// rows than one pass holds read these values from L1, not each pass the whole context
// from L2. Each row's sums carry from one stretch to the next through memory, exactly.
inline constexpr int64_t kValueStretch = 64;

// SumValuesRows for any R: rows in passes of at most kValueAccumulators / NV (a pass per
// row for head_dim 256), the passes taking turns per stretch of positions.
// From head element e0 (a multiple of 16) on: a unit's value sums split between the
// threads by head elements (each element's sum is its own chain, whichever elements
// share the pass).
template <int R, int NV, typename T>
void SumValuesGroup(const PagedAttentionArgs& a, const int32_t* table, int kv_head, const int64_t* n_cached,
                    const float* const* p, __mmask16 last, float (*out)[256], int e0 = 0) {
  constexpr int kPass = std::max(1, std::min(R, kValueAccumulators<NV> / NV));
  int64_t n_max = n_cached[0];
  for (int i = 1; i < R; ++i) n_max = std::max(n_max, n_cached[i]);
  if constexpr (kPass >= R) {
    SumValuesRows<R, NV, T>(a, table, kv_head, n_cached, p, last, out, 0, n_max, false, e0);
  } else {
    constexpr int kFull = R / kPass * kPass;
    const int64_t stretch = std::max<int64_t>(1, kValueStretch / a.block_size) * a.block_size;
    for (int64_t t0 = 0; t0 < n_max; t0 += stretch) {
      const int64_t t1 = std::min(n_max, t0 + stretch);
      for (int i = 0; i < kFull; i += kPass) {
        SumValuesRows<kPass, NV, T>(a, table, kv_head, n_cached + i, p + i, last, out + i, t0, t1, t0 > 0, e0);
      }
      if constexpr (R % kPass != 0) {
        SumValuesRows<R % kPass, NV, T>(a, table, kv_head, n_cached + kFull, p + kFull, last, out + kFull, t0, t1,
                                        t0 > 0, e0);
      }
    }
  }
}

// Row r's query for head h, times the softmax scale, in registers.
template <int NV>
inline void LoadScaledQuery(const PagedAttentionArgs& a, int64_t r, int h, __mmask16 last, __m512 (&q)[NV]) {
  const float* qp = a.q + r * a.q_stride + static_cast<int64_t>(h) * a.head_dim;
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int i = 0; i < NV; ++i) q[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(MaskOf<NV>(i, last), qp + 16 * i), scale);
}

// The head's offset into a K/V row and the predictive rows' K (V) of it (null without
// predictive rows: never read then, and no offset may be applied to null).
struct HeadView {
  int64_t kv_dim, kv_off;
  const float* pred_k;
  const float* pred_v;
  HeadView(const PagedAttentionArgs& a, int h)
      : kv_dim(static_cast<int64_t>(a.num_kv_heads) * a.head_dim),
        kv_off(static_cast<int64_t>(h / (a.num_heads / a.num_kv_heads)) * a.head_dim),
        pred_k(a.pred_k != nullptr ? a.pred_k + kv_off : nullptr),
        pred_v(a.pred_v != nullptr ? a.pred_v + kv_off : nullptr) {}
  // The row of the t-th key among row r's own rows, t >= n_cached (an index, not a
  // pointer shifted before the array: group_rows is null without any).
  int64_t own(const PagedAttentionArgs& a, int64_t r, int64_t t) const {
    return int64_t{a.group_rows[int64_t{a.group_begin[r]} + t - a.num_cached[r]]};
  }
};

// Scores of row r's own rows (s[num_cached, n)), then the softmax over all n scores in
// place, unnormalised: returns 1 / Σ.
template <int NV>
float OwnScoresSoftmax(const PagedAttentionArgs& a, int64_t r, const HeadView& hv, const __m512 (&q)[NV], float* s,
                       __mmask16 last) {
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  for (int64_t t = n_cached; t < n; ++t) s[t] = DotQ<NV, float>(q, hv.pred_k + hv.own(a, r, t) * hv.kv_dim, last);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = LanesBelow(n - t);
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, s + t));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = LanesBelow(n - t);
    const __m512 e = _mm512_maskz_mov_ps(m, ExpAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), max)));
    _mm512_mask_storeu_ps(s + t, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// Row r's output for head h: the cached positions' weighted values (cached_part), plus
// its own rows' (one FMA chain per vector, continuing from cached_part), times inv.
// Vectors [v0, v1) of the head's NV only (a unit's outputs split between the threads).
template <int NV>
void FinishRow(const PagedAttentionArgs& a, int64_t r, int h, const HeadView& hv, const float* s,
               const float* cached_part, float inv, __mmask16 last, int v0 = 0, int v1 = NV) {
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  __m512 o[NV];
  for (int i = v0; i < v1; ++i) o[i] = _mm512_maskz_loadu_ps(MaskOf<NV>(i, last), cached_part + 16 * i);
  for (int64_t t = n_cached; t < n; ++t) {
    const __m512 p = _mm512_set1_ps(s[t]);
    const float* v = hv.pred_v + hv.own(a, r, t) * hv.kv_dim;
    for (int i = v0; i < v1; ++i) o[i] = _mm512_fmadd_ps(p, Load16(v + 16 * i, MaskOf<NV>(i, last)), o[i]);
  }
  float* out = a.out + r * a.out_stride + static_cast<int64_t>(h) * a.head_dim;
  const __m512 norm = _mm512_set1_ps(inv);
  for (int i = v0; i < v1; ++i) _mm512_mask_storeu_ps(out + 16 * i, MaskOf<NV>(i, last), _mm512_mul_ps(o[i], norm));
}

// Rows [r0, r0 + R) of one sequence, head h, keys and values in lanes (block-transposed
// cache, block_size a multiple of 16): the cached scores and the cached values' sum run
// for the rows together (ScoreCachedRows, SumValuesRows), the rest per row. `s[i]` holds
// at least n + 16 floats for row r0 + i.
template <int R, int NV, typename T>
void AttendLanes(const PagedAttentionArgs& a, int64_t r0, int h, float* const* s, __mmask16 last, bool prefetch) {
  const HeadView hv(a, h);
  const int kv_head = static_cast<int>(hv.kv_off / a.head_dim);
  const int32_t* table = a.block_tables + a.table_offset[r0];
  alignas(64) float qs[R][256];
  int64_t n_cached[R];
  for (int i = 0; i < R; ++i) {
    ScaledQuery(a, r0 + i, h, qs[i]);
    n_cached[i] = a.num_cached[r0 + i];
  }
  ScoreCachedRows<R, T>(a, table, kv_head, n_cached, qs, s, prefetch);
  float inv[R];
  for (int i = 0; i < R; ++i) {
    __m512 q[NV];
    LoadScaledQuery<NV>(a, r0 + i, h, last, q);
    inv[i] = OwnScoresSoftmax<NV>(a, r0 + i, hv, q, s[i], last);
  }
  alignas(64) float cached_part[R][256];
  SumValuesGroup<R, NV, T>(a, table, kv_head, n_cached, s, last, cached_part);
  for (int i = 0; i < R; ++i) FinishRow<NV>(a, r0 + i, h, hv, s[i], cached_part[i], inv[i], last);
}

// One (row, head) over the other cache layouts (slot-major, or blocks narrower than a
// vector): one key at a time. `s` holds at least n + 16 floats.
template <int NV, typename T>
void AttendKeys(const PagedAttentionArgs& a, int64_t r, int h, float* s, __mmask16 last) {
  const HeadView hv(a, h);
  const int hd = a.head_dim;
  const int bs = a.block_size;
  const int64_t n_cached = a.num_cached[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  const int64_t kv_head = hv.kv_off / hd;
  __m512 q[NV];
  LoadScaledQuery<NV>(a, r, h, last, q);
  const bool transposed = a.kv_layout == KvLayout::kBlockTransposed;
  // Position t's key (value) row, gathered from a narrow transposed block into `row`, or
  // in place (slot-major).
  alignas(64) float row[256];
  auto cached_row = [&](const void* cache, int64_t t) -> const float* {
    const T* base = static_cast<const T*>(cache);
    if (transposed && cache == a.v_cache) {
      const T* v = base + ((int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * bs + t % bs) * hd;
      for (int d = 0; d < hd; ++d) row[d] = ToFloat(v[d]);
      return row;
    }
    if (transposed) {
      const T* b = base + ((int64_t{table[t / bs]} * a.num_kv_heads + kv_head) * hd) * bs + t % bs;
      for (int d = 0; d < hd; ++d) row[d] = ToFloat(b[int64_t{d} * bs]);
      return row;
    }
    const T* k = base + (int64_t{table[t / bs]} * bs + t % bs) * hv.kv_dim + hv.kv_off;
    for (int d = 0; d < hd; ++d) row[d] = ToFloat(k[d]);
    return row;
  };
  for (int64_t t = 0; t < n_cached; ++t) s[t] = DotQ<NV, float>(q, cached_row(a.k_cache, t), last);
  const float inv = OwnScoresSoftmax<NV>(a, r, hv, q, s, last);
  __m512 o[NV];
  for (int i = 0; i < NV; ++i) o[i] = _mm512_setzero_ps();
  for (int64_t t = 0; t < n_cached; ++t) {
    const __m512 p = _mm512_set1_ps(s[t]);
    const float* v = cached_row(a.v_cache, t);
    for (int i = 0; i < NV; ++i) o[i] = _mm512_fmadd_ps(p, Load16(v + 16 * i, MaskOf<NV>(i, last)), o[i]);
  }
  alignas(64) float cached_part[256];
  for (int i = 0; i < NV; ++i) _mm512_mask_storeu_ps(cached_part + 16 * i, MaskOf<NV>(i, last), o[i]);
  FinishRow<NV>(a, r, h, hv, s, cached_part, inv, last);
}

template <int NV, typename T>
void AttendGroup(const PagedAttentionArgs& a, int64_t r0, int count, int h, float* const* s, __mmask16 last,
                 bool prefetch) {
  if (a.kv_layout == KvLayout::kBlockTransposed && a.block_size % 16 == 0) {
    switch (count) {
      case 1: return AttendLanes<1, NV, T>(a, r0, h, s, last, prefetch);
      case 2: return AttendLanes<2, NV, T>(a, r0, h, s, last, prefetch);
      case 3: return AttendLanes<3, NV, T>(a, r0, h, s, last, prefetch);
      case 4: return AttendLanes<4, NV, T>(a, r0, h, s, last, prefetch);
      case 5: return AttendLanes<5, NV, T>(a, r0, h, s, last, prefetch);
      case 6: return AttendLanes<6, NV, T>(a, r0, h, s, last, prefetch);
      case 7: return AttendLanes<7, NV, T>(a, r0, h, s, last, prefetch);
      case 8: return AttendLanes<8, NV, T>(a, r0, h, s, last, prefetch);
      case 9: return AttendLanes<9, NV, T>(a, r0, h, s, last, prefetch);
      case 10: return AttendLanes<10, NV, T>(a, r0, h, s, last, prefetch);
      case 11: return AttendLanes<11, NV, T>(a, r0, h, s, last, prefetch);
      default: return AttendLanes<12, NV, T>(a, r0, h, s, last, prefetch);
    }
  }
  for (int i = 0; i < count; ++i) AttendKeys<NV, T>(a, r0 + i, h, s[i], last);
}

template <typename T>
bool AttendRowsDispatch(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scores,
                        bool prefetch) {
  if (a.head_dim % 8 != 0 || a.head_dim > 256 || count < 1 || count > kMaxGroupRows) return false;
  const int nv = (a.head_dim + 15) / 16;
  if (nv == 7 || (nv > 8 && nv != 16)) return false;
  const __mmask16 last = a.head_dim % 16 == 0 ? __mmask16(0xffff) : __mmask16(0x00ff);
  // Each row's scores in its own stretch of `scores` (n + 16 floats: room for a masked
  // vector past the end).
  int64_t begin[kMaxGroupRows + 1] = {0};
  for (int i = 0; i < count; ++i) begin[i + 1] = begin[i] + a.num_cached[r0 + i] + a.num_own[r0 + i] + 16;
  scores.resize(static_cast<size_t>(begin[count]));
  float* s[kMaxGroupRows];
  for (int i = 0; i < count; ++i) s[i] = scores.data() + begin[i];
  switch (nv) {
    case 1: AttendGroup<1, T>(a, r0, count, h, s, last, prefetch); break;
    case 2: AttendGroup<2, T>(a, r0, count, h, s, last, prefetch); break;
    case 3: AttendGroup<3, T>(a, r0, count, h, s, last, prefetch); break;
    case 4: AttendGroup<4, T>(a, r0, count, h, s, last, prefetch); break;
    case 5: AttendGroup<5, T>(a, r0, count, h, s, last, prefetch); break;
    case 6: AttendGroup<6, T>(a, r0, count, h, s, last, prefetch); break;
    case 8: AttendGroup<8, T>(a, r0, count, h, s, last, prefetch); break;
    default: AttendGroup<16, T>(a, r0, count, h, s, last, prefetch); break;
  }
  return true;
}

// Calls fn(std::integral_constant<int, R>) for R = n (1 to kMaxGroupRows).
template <typename Fn>
void WithRows(int n, Fn fn) {
  switch (n) {
    case 1: return fn(std::integral_constant<int, 1>());
    case 2: return fn(std::integral_constant<int, 2>());
    case 3: return fn(std::integral_constant<int, 3>());
    case 4: return fn(std::integral_constant<int, 4>());
    case 5: return fn(std::integral_constant<int, 5>());
    case 6: return fn(std::integral_constant<int, 6>());
    case 7: return fn(std::integral_constant<int, 7>());
    case 8: return fn(std::integral_constant<int, 8>());
    case 9: return fn(std::integral_constant<int, 9>());
    case 10: return fn(std::integral_constant<int, 10>());
    case 11: return fn(std::integral_constant<int, 11>());
    default: return fn(std::integral_constant<int, 12>());
  }
}

// The AVX-512 kernel's phases (AttendLanes's arithmetic per vector): the cached scores in
// position ranges of two steps of keys, the own keys and the unnormalised softmax per
// vector, the value sums and outputs per 16 head elements (ranges of up to 4 vectors
// run together).
template <typename T, int NV>
class UnitKernelAvx512Impl final : public UnitKernel {
 public:
  // One row group: as units the default model's T(10) and T(12) at 400 positions ran a
  // little faster than as groups, T(14) and T(16) a little slower (docs/benchmarks.md,
  // "Xeon AMX: verify-forward cost").
  int MaxRows() const override { return kMaxGroupRows; }
  int MaxVectors() const override { return kMaxGroupRows; }

  int64_t ScoreItems(const PagedAttentionArgs& a, const AttentionUnit& u) const override {
    int64_t chunk = 0;
    WithRows(u.vectors(), [&](auto r) { chunk = ScoreChunk<decltype(r)::value>(); });
    return std::max<int64_t>(1, (u.max_cached(a) + chunk - 1) / chunk);
  }
  void Score(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
             int64_t last) const override {
    WithRows(u.vectors(), [&](auto r) {
      constexpr int R = decltype(r)::value;
      alignas(64) float qs[R][256];
      int64_t n_cached[R];
      float* sp[R];
      for (int i = 0; i < R; ++i) {
        ScaledQuery(a, u.row(i), u.head(i), qs[i]);
        n_cached[i] = a.num_cached[u.row(i)];
        sp[i] = s.scores + i * s.stride;
      }
      const int kv_head = u.h0 / (a.num_heads / a.num_kv_heads);
      ScoreCachedRows<R, T>(a, a.block_tables + a.table_offset[u.r0], kv_head, n_cached, qs, sp, true,
                            first * ScoreChunk<R>(), last * ScoreChunk<R>());
    });
  }
  void OwnKeysAndSoftmax(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s,
                         int i) const override {
    const int64_t r = u.row(i);
    const int h = u.head(i);
    __m512 q[NV];
    LoadScaledQuery<NV>(a, r, h, LastMask(a), q);
    s.inv[i] = OwnScoresSoftmax<NV>(a, r, HeadView(a, h), q, s.scores + i * s.stride, LastMask(a));
  }
  int64_t SumItems(const PagedAttentionArgs&, const AttentionUnit&) const override { return NV; }
  // Head vectors [first, last): their cached sums for every vector of the unit, then
  // each vector's own rows and normalisation.
  void Sum(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
           int64_t last) const override {
    WithRows(u.vectors(), [&](auto r) {
      constexpr int R = decltype(r)::value;
      int64_t n_cached[R];
      const float* p[R];
      for (int i = 0; i < R; ++i) {
        n_cached[i] = a.num_cached[u.row(i)];
        p[i] = s.scores + i * s.stride;
      }
      const int32_t* table = a.block_tables + a.table_offset[u.r0];
      const int kv_head = u.h0 / (a.num_heads / a.num_kv_heads);
      alignas(64) float cached_part[R][256];
      for (int v = static_cast<int>(first); v < last;) {
        const int width = last - v >= 4 ? 4 : last - v >= 2 ? 2 : 1;
        // The head's last vector keeps its mask (head_dim 8); the others are whole.
        const __mmask16 mask = v + width == NV ? LastMask(a) : __mmask16(0xffff);
        switch (width) {
          case 4: SumValuesGroup<R, 4, T>(a, table, kv_head, n_cached, p, mask, cached_part, 16 * v); break;
          case 2: SumValuesGroup<R, 2, T>(a, table, kv_head, n_cached, p, mask, cached_part, 16 * v); break;
          default: SumValuesGroup<R, 1, T>(a, table, kv_head, n_cached, p, mask, cached_part, 16 * v); break;
        }
        v += width;
      }
      for (int i = 0; i < R; ++i) {
        const int h = u.head(i);
        FinishRow<NV>(a, u.row(i), h, HeadView(a, h), p[i], cached_part[i], s.inv[i], LastMask(a),
                      static_cast<int>(first), static_cast<int>(last));
      }
    });
  }

 private:
  // Positions per item of the first phase: two steps of ScoreCachedRows.
  template <int R>
  static constexpr int64_t ScoreChunk() {
    return 2 * 16 * kScoreVectors<R>;
  }
  // The mask of the head's last vector: half of it where head_dim is an odd multiple of 8.
  static __mmask16 LastMask(const PagedAttentionArgs& a) {
    return a.head_dim % 16 == 0 ? __mmask16(0xffff) : __mmask16(0x00ff);
  }
};

template <typename T>
const UnitKernel* UnitKernelFor(int nv) {
  static const UnitKernelAvx512Impl<T, 1> k1;
  static const UnitKernelAvx512Impl<T, 2> k2;
  static const UnitKernelAvx512Impl<T, 3> k3;
  static const UnitKernelAvx512Impl<T, 4> k4;
  static const UnitKernelAvx512Impl<T, 5> k5;
  static const UnitKernelAvx512Impl<T, 6> k6;
  static const UnitKernelAvx512Impl<T, 8> k8;
  static const UnitKernelAvx512Impl<T, 16> k16;
  switch (nv) {
    case 1: return &k1;
    case 2: return &k2;
    case 3: return &k3;
    case 4: return &k4;
    case 5: return &k5;
    case 6: return &k6;
    case 8: return &k8;
    default: return &k16;
  }
}

}  // namespace

const UnitKernel* UnitKernelAvx512(const PagedAttentionArgs& a) {
  if (a.kv_layout != KvLayout::kBlockTransposed || a.block_size % 16 != 0) return nullptr;
  if (a.head_dim % 8 != 0 || a.head_dim > 256) return nullptr;
  const int nv = (a.head_dim + 15) / 16;
  if (nv == 7 || (nv > 8 && nv != 16)) return nullptr;
  return a.cache_element == KvElement::kBf16 ? UnitKernelFor<uint16_t>(nv) : UnitKernelFor<float>(nv);
}

bool AttendRowsAvx512(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scores,
                      bool prefetch) {
  return a.cache_element == KvElement::kBf16 ? AttendRowsDispatch<uint16_t>(a, r0, count, h, scores, prefetch)
                                             : AttendRowsDispatch<float>(a, r0, count, h, scores, prefetch);
}

}  // namespace crossreg::cpu::internal
