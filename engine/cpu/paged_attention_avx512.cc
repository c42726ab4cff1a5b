// AVX-512 attention of one (row, head) for head_dim a multiple of 8 up to 256: the query
// and the output accumulator stay in registers across every attended position (no
// per-position stores); keys are scored in place from the paged cache (f32 or bf16),
// 16 positions per vector op when the block is laid out keys-in-lanes.
// Compiled with -mavx512f etc.; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
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

// Sums of 16 vectors, lane i of the result = Σ lanes of v[i]: a transpose-and-add tree
// (about 3 instructions per vector instead of a full horizontal reduction each).
inline __m512 Sum16(__m512 (&v)[16]) {
  __m512 w[8];
  for (int i = 0; i < 8; ++i) {
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 u[4];
  for (int j = 0; j < 4; ++j) {
    const __m512d a = _mm512_castps_pd(w[2 * j]), b = _mm512_castps_pd(w[2 * j + 1]);
    u[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
}

// Scores of 16 consecutive keys `stride` elements apart.
template <int NV, typename KeyT>
inline __m512 Dot16(const __m512 (&q)[NV], const KeyT* k, int64_t stride, __mmask16 last) {
  __m512 v[16];
  for (int t = 0; t < 16; ++t) {
    __m512 acc = _mm512_mul_ps(q[0], Load16(k + t * stride, MaskOf<NV>(0, last)));
    for (int i = 1; i < NV; ++i) acc = _mm512_fmadd_ps(q[i], Load16(k + t * stride + 16 * i, MaskOf<NV>(i, last)), acc);
    v[t] = acc;
  }
  return Sum16(v);
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

// Cached scores of up to kMaxGroupRows rows of one sequence (one block table) for one
// head, keys in lanes: each key vector is loaded once and multiplied into every row's
// accumulators, so the rows' FMA chains run side by side instead of one latency-bound
// chain at a time. Row i's lanes see exactly the per-row arithmetic (the same loads on
// its valid lanes, the same two chains over d, the same sum), so its scores do not
// depend on which rows share the call.
template <int R, typename T>
void ScoreCachedRows(const PagedAttentionArgs& a, const int32_t* table, int kv_head, const int64_t* n_cached,
                     const float (*qs)[256], float* const* s) {
  const int hd = a.head_dim;
  const int bs = a.block_size;
  int64_t n_max = 0;
  for (int i = 0; i < R; ++i) n_max = std::max(n_max, n_cached[i]);
  const T* kt = static_cast<const T*>(a.k_cache);
  const T* vt = static_cast<const T*>(a.v_cache);
  const int64_t blocks = (n_max + bs - 1) / bs;
  for (int64_t b = 0; b < std::min(blocks, kPrefetchBlocks); ++b) PrefetchBlock(a, kt, table, kv_head, b, _MM_HINT_T0);
  for (int64_t t0 = 0; t0 < n_max; t0 += bs) {
    // The keys a few blocks ahead, and this block's values for the weighted sum (to L2:
    // a long context's values outgrow L1 before the sum reads them).
    if (t0 / bs + kPrefetchBlocks < blocks) PrefetchBlock(a, kt, table, kv_head, t0 / bs + kPrefetchBlocks, _MM_HINT_T0);
    PrefetchBlock(a, vt, table, kv_head, t0 / bs, _MM_HINT_T1);
    const T* kb = kt + ((int64_t{table[t0 / bs]} * a.num_kv_heads + kv_head) * hd) * bs;
    const int64_t t1 = std::min<int64_t>(n_max, t0 + bs);
    for (int64_t t = t0; t < t1; t += 16) {
      const __mmask16 m = LanesBelow(t1 - t);
      __m512 acc0[R], acc1[R];
      for (int i = 0; i < R; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
      const T* col = kb + (t - t0);
      int d = 0;
      for (; d + 2 <= hd; d += 2) {
        const __m512 k0 = Load16(col + int64_t{d} * bs, m);
        const __m512 k1 = Load16(col + int64_t{d + 1} * bs, m);
        for (int i = 0; i < R; ++i) {
          acc0[i] = _mm512_fmadd_ps(_mm512_set1_ps(qs[i][d]), k0, acc0[i]);
          acc1[i] = _mm512_fmadd_ps(_mm512_set1_ps(qs[i][d + 1]), k1, acc1[i]);
        }
      }
      if (d < hd) {
        const __m512 k0 = Load16(col + int64_t{d} * bs, m);
        for (int i = 0; i < R; ++i) acc0[i] = _mm512_fmadd_ps(_mm512_set1_ps(qs[i][d]), k0, acc0[i]);
      }
      for (int i = 0; i < R; ++i) {
        const __mmask16 mi = LanesBelow(std::min<int64_t>(n_cached[i], t0 + bs) - t);
        if (mi != 0) _mm512_mask_storeu_ps(s[i] + t, mi, _mm512_add_ps(acc0[i], acc1[i]));
      }
    }
  }
}

// Σ_t p[t] · V[t][d0 + d] over the cached positions, for DN (8 or 16) head elements,
// values in lanes: one accumulator per head element collects 16 positions at a time,
// summed across lanes at the end. DN is a constant so the accumulators stay in registers.
template <int DN, typename T>
inline void SumValues(const PagedAttentionArgs& a, const int32_t* table, int kv_head, int d0, const float* p,
                      int64_t n_cached, float* out) {
  const int hd = a.head_dim;
  const int bs = a.block_size;
  const T* vt = static_cast<const T*>(a.v_cache);
  __m512 acc[16];
  for (int d = 0; d < 16; ++d) acc[d] = _mm512_setzero_ps();
  for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
    const T* vb = vt + ((int64_t{table[t0 / bs]} * a.num_kv_heads + kv_head) * hd + d0) * bs;
    const int64_t t1 = std::min<int64_t>(n_cached, t0 + bs);
    for (int64_t t = t0; t < t1; t += 16) {
      const __mmask16 m = LanesBelow(t1 - t);
      const __m512 pt = _mm512_maskz_loadu_ps(m, p + t);
      for (int d = 0; d < DN; ++d) acc[d] = _mm512_fmadd_ps(pt, Load16(vb + int64_t{d} * bs + (t - t0), m), acc[d]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Sum16(acc));
  for (int d = 0; d < DN; ++d) out[d] = sums[d];
}

// One (row, head). `s` holds at least n + 16 floats; when `cached_scored`, its first
// num_cached entries already hold the cached positions' scores (ScoreCachedRows).
template <int NV, typename T>
void Attend(const PagedAttentionArgs& a, int64_t r, int h, float* s, bool cached_scored, __mmask16 last) {
  const int hd = a.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(a.num_kv_heads) * hd;
  const int64_t kv_off = static_cast<int64_t>(h / (a.num_heads / a.num_kv_heads)) * hd;
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  const T* k_cache = static_cast<const T*>(a.k_cache) + kv_off;
  const T* v_cache = static_cast<const T*>(a.v_cache) + kv_off;
  // Null without predictive rows (never read then); no offset may be applied to null.
  const float* pred_k = a.pred_k != nullptr ? a.pred_k + kv_off : nullptr;
  const float* pred_v = a.pred_v != nullptr ? a.pred_v + kv_off : nullptr;
  // own(t), t >= n_cached: the row of the t-th key among this group's own rows (an
  // index, not a pointer shifted before the array: group_rows is null without any).
  const int64_t own_base = int64_t{a.group_begin[r]} - n_cached;
  auto own = [&](int64_t t) { return int64_t{a.group_rows[own_base + t]}; };
  const float* qp = a.q + r * a.q_stride + static_cast<int64_t>(h) * hd;
  __m512 q[NV];
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int i = 0; i < NV; ++i) q[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(MaskOf<NV>(i, last), qp + 16 * i), scale);
  // Scores, block by block of the paged cache, then the group's own rows.
  const int bs = a.block_size;
  if (cached_scored) {
    // ScoreCachedRows filled s[0, n_cached).
  } else if (a.kv_layout == KvLayout::kBlockTransposed && bs % 16 == 0) {
    // Keys in lanes: element d of 16 consecutive keys is one vector, so a block's
    // scores are head_dim FMAs per 16 positions against the broadcast query.
    alignas(64) float qs[1][256];
    float* const rows_s[1] = {s};
    ScaledQuery(a, r, h, qs[0]);
    ScoreCachedRows<1, T>(a, table, static_cast<int>(kv_off / hd), &n_cached, qs, rows_s);
  } else if (a.kv_layout == KvLayout::kBlockTransposed) {
    // Blocks narrower than a vector: one key at a time, gathered into a row.
    const T* kt = static_cast<const T*>(a.k_cache);
    alignas(64) float key[256];
    for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
      const T* kb = kt + ((int64_t{table[t0 / bs]} * a.num_kv_heads + kv_off / hd) * hd) * bs;
      const int64_t t1 = std::min<int64_t>(n_cached, t0 + bs);
      for (int64_t t = t0; t < t1; ++t) {
        for (int d = 0; d < hd; ++d) key[d] = ToFloat(kb[int64_t{d} * bs + (t - t0)]);
        s[t] = DotQ<NV, float>(q, key, last);
      }
    }
  } else {
    for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
      const T* kb = k_cache + int64_t{table[t0 / bs]} * bs * kv_dim;
      const int64_t t1 = std::min<int64_t>(n_cached, t0 + bs);
      int64_t t = t0;
      for (; t + 16 <= t1; t += 16) _mm512_storeu_ps(s + t, Dot16<NV, T>(q, kb + (t - t0) * kv_dim, kv_dim, last));
      for (; t < t1; ++t) s[t] = DotQ<NV, T>(q, kb + (t - t0) * kv_dim, last);
    }
  }
  for (int64_t t = n_cached; t < n; ++t) s[t] = DotQ<NV, float>(q, pred_k + own(t) * kv_dim, last);
  // Softmax over the n scores.
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = n - t >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - t)) - 1u);
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, s + t));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = n - t >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - t)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(m, ExpAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), max)));
    _mm512_mask_storeu_ps(s + t, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  const float inv = 1.0f / _mm512_reduce_add_ps(sum);
  // Weighted sum of values.
  alignas(64) float cached_part[256];  // Σ over cached positions, per head element
  __m512 o[NV];
  for (int i = 0; i < NV; ++i) o[i] = _mm512_setzero_ps();
  if (a.kv_layout == KvLayout::kBlockTransposed && bs % 16 == 0) {
    // Values in lanes (SumValues), 16 head elements at a time.
    const int kv_head = static_cast<int>(kv_off / hd);
    for (int d0 = 0; d0 < hd; d0 += 16) {
      if (hd - d0 >= 16) {
        SumValues<16, T>(a, table, kv_head, d0, s, n_cached, cached_part + d0);
      } else {
        SumValues<8, T>(a, table, kv_head, d0, s, n_cached, cached_part + d0);
      }
    }
    for (int i = 0; i < NV; ++i) o[i] = _mm512_maskz_loadu_ps(MaskOf<NV>(i, last), cached_part + 16 * i);
  } else if (a.kv_layout == KvLayout::kBlockTransposed) {
    // Blocks narrower than a vector: one value row at a time, gathered.
    alignas(64) float row[256];
    for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
      const T* vb = static_cast<const T*>(a.v_cache) +
                    ((int64_t{table[t0 / bs]} * a.num_kv_heads + kv_off / hd) * hd) * bs;
      const int64_t t1 = std::min<int64_t>(n_cached, t0 + bs);
      for (int64_t t = t0; t < t1; ++t) {
        for (int d = 0; d < hd; ++d) row[d] = ToFloat(vb[int64_t{d} * bs + (t - t0)]);
        const __m512 p = _mm512_set1_ps(s[t]);
        for (int i = 0; i < NV; ++i) o[i] = _mm512_fmadd_ps(p, Load16(row + 16 * i, MaskOf<NV>(i, last)), o[i]);
      }
    }
  } else {
    for (int64_t t0 = 0; t0 < n_cached; t0 += bs) {
      const T* vb = v_cache + int64_t{table[t0 / bs]} * bs * kv_dim;
      const int64_t t1 = std::min<int64_t>(n_cached, t0 + bs);
      for (int64_t t = t0; t < t1; ++t) {
        const __m512 p = _mm512_set1_ps(s[t]);
        const T* v = vb + (t - t0) * kv_dim;
        for (int i = 0; i < NV; ++i) o[i] = _mm512_fmadd_ps(p, Load16(v + 16 * i, MaskOf<NV>(i, last)), o[i]);
      }
    }
  }
  for (int64_t t = n_cached; t < n; ++t) {
    const __m512 p = _mm512_set1_ps(s[t]);
    const float* v = pred_v + own(t) * kv_dim;
    for (int i = 0; i < NV; ++i) o[i] = _mm512_fmadd_ps(p, Load16(v + 16 * i, MaskOf<NV>(i, last)), o[i]);
  }
  float* out = a.out + r * a.out_stride + static_cast<int64_t>(h) * hd;
  const __m512 norm = _mm512_set1_ps(inv);
  for (int i = 0; i < NV; ++i) _mm512_mask_storeu_ps(out + 16 * i, MaskOf<NV>(i, last), _mm512_mul_ps(o[i], norm));
}

template <typename T>
bool AttendRowsDispatch(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scores) {
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
  const bool joint = count > 1 && a.kv_layout == KvLayout::kBlockTransposed && a.block_size % 16 == 0;
  if (joint) {
    alignas(64) float qs[kMaxGroupRows][256];
    int64_t n_cached[kMaxGroupRows];
    for (int i = 0; i < count; ++i) {
      ScaledQuery(a, r0 + i, h, qs[i]);
      n_cached[i] = a.num_cached[r0 + i];
    }
    const int32_t* table = a.block_tables + a.table_offset[r0];
    const int kv_head = h / (a.num_heads / a.num_kv_heads);
    switch (count) {
      case 2: ScoreCachedRows<2, T>(a, table, kv_head, n_cached, qs, s); break;
      case 3: ScoreCachedRows<3, T>(a, table, kv_head, n_cached, qs, s); break;
      default: ScoreCachedRows<4, T>(a, table, kv_head, n_cached, qs, s); break;
    }
  }
  for (int i = 0; i < count; ++i) {
    const int64_t r = r0 + i;
    switch (nv) {
      case 1: Attend<1, T>(a, r, h, s[i], joint, last); break;
      case 2: Attend<2, T>(a, r, h, s[i], joint, last); break;
      case 3: Attend<3, T>(a, r, h, s[i], joint, last); break;
      case 4: Attend<4, T>(a, r, h, s[i], joint, last); break;
      case 5: Attend<5, T>(a, r, h, s[i], joint, last); break;
      case 6: Attend<6, T>(a, r, h, s[i], joint, last); break;
      case 8: Attend<8, T>(a, r, h, s[i], joint, last); break;
      default: Attend<16, T>(a, r, h, s[i], joint, last); break;
    }
  }
  return true;
}

}  // namespace

bool AttendRowsAvx512(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scores) {
  return a.cache_element == KvElement::kBf16 ? AttendRowsDispatch<uint16_t>(a, r0, count, h, scores)
                                             : AttendRowsDispatch<float>(a, r0, count, h, scores);
}

}  // namespace crossreg::cpu::internal
