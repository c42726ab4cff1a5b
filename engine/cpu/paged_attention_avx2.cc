// The AVX2 attention path behind engine/cpu/paged_attention.h, for the CPU backend's
// block-transposed cache: one head and up to kMaxGroupRowsAvx2 rows of one sequence at a
// time (a prefill's or a verify step's rows), sharing each key and value load (alone, a
// row's kernel is load-bound). 8 cached keys are scored per vector straight from the
// cache's key lanes (no copy of a key into a row), and the values are summed block by
// block with the accumulators in registers. Compiled with -mavx2 -mfma; called only
// after run-time detection.
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
#include <cstdint>
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

// Output elements summed per pass of the value sum: G x kPassElements / 8 accumulators
// stay in registers.
template <int G>
constexpr int kPassElements = G == 1 ? 64 : G == 2 ? 32 : G <= 6 ? 16 : 8;
// Groups of 8 keys scored at once per row: independent FMA chains hide their latency,
// G x kKeyGroups accumulators.
template <int G>
constexpr int kKeyGroups = G <= 2 ? 4 : G <= 6 ? 2 : 1;

// Rows [r0, r0 + G) of one sequence (one block table) and head h. The rows share each
// key and value load; each row's arithmetic is the one-row kernel's, in the same order.
template <typename T, int G>
class RowGroup {
 public:
  RowGroup(const PagedAttentionArgs& a, int64_t r0, int h, std::vector<float>& scratch)
      : a_(a), r0_(r0), h_(h), hd_(a.head_dim), bs_(a.block_size), kv_head_(h / (a.num_heads / a.num_kv_heads)),
        table_(a.block_tables + a.table_offset[r0]) {
    int64_t max_n = 0;
    for (int i = 0; i < G; ++i) {
      q_[i] = a.q + (r0 + i) * a.q_stride + int64_t{h} * hd_;
      n_cached_[i] = a.num_cached[r0 + i];
      n_[i] = n_cached_[i] + a.num_own[r0 + i];
      max_cached_ = std::max(max_cached_, n_cached_[i]);
      min_cached_ = std::min(min_cached_, n_cached_[i]);
      max_n = std::max(max_n, n_[i]);
    }
    scratch.resize(static_cast<size_t>(G * max_n));
    for (int i = 0; i < G; ++i) s_[i] = scratch.data() + i * max_n;
  }

  void Run() {
    ScoreFullKeyGroups();
    ScoreTailGroup();
    for (int i = 0; i < G; ++i) {
      ScoreOwnKeys(i);
      Softmax(s_[i], n_[i]);
    }
    SumValues();
  }

 private:
  const T* KeyLanes(int64_t t) const {  // key element d of position t at [d * bs]
    return static_cast<const T*>(a_.k_cache) +
           (int64_t{table_[t / bs_]} * a_.num_kv_heads + kv_head_) * hd_ * bs_ + t % bs_;
  }
  const T* ValueRow(int64_t t) const {
    return static_cast<const T*>(a_.v_cache) +
           ((int64_t{table_[t / bs_]} * a_.num_kv_heads + kv_head_) * bs_ + t % bs_) * hd_;
  }
  // Row i's own (predictive) key or value for position t >= its cached context.
  const float* OwnRow(const float* base, int i, int64_t t) const {
    const int64_t row = a_.group_rows[a_.group_begin[r0_ + i] + (t - n_cached_[i])];
    return base + row * int64_t{a_.num_kv_heads} * hd_ + int64_t{kv_head_} * hd_;
  }

  // KG full groups of 8 keys from groups[g] on, for every row.
  template <int KG>
  void ScoreKeyGroups(const std::vector<int64_t>& groups, size_t g) {
    __m256 acc[G][KG];
    const T* k[KG];
#pragma GCC unroll 16
    for (int j = 0; j < KG; ++j) k[j] = KeyLanes(groups[g + j]);
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < KG; ++j) acc[i][j] = _mm256_setzero_ps();
    for (int d = 0; d < hd_; ++d) {
      __m256 kd[KG];
#pragma GCC unroll 16
      for (int j = 0; j < KG; ++j) kd[j] = Load8(k[j] + int64_t{d} * bs_);
#pragma GCC unroll 16
      for (int i = 0; i < G; ++i) {
        const __m256 qd = _mm256_broadcast_ss(q_[i] + d);
#pragma GCC unroll 16
        for (int j = 0; j < KG; ++j) acc[i][j] = _mm256_fmadd_ps(qd, kd[j], acc[i][j]);
      }
    }
    const __m256 scale = _mm256_set1_ps(a_.scale);
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < KG; ++j) _mm256_storeu_ps(s_[i] + groups[g + j], _mm256_mul_ps(acc[i][j], scale));
  }

  // Cached keys in full groups of 8 inside a block up to the longest row's context, scored
  // for every row (a row past its own context scores keys it then ignores).
  void ScoreFullKeyGroups() {
    thread_local std::vector<int64_t> groups;  // first position of each full group
    groups.clear();
    for (int64_t t = 0; t < max_cached_; t += bs_) {
      const int64_t count = std::min<int64_t>(bs_, max_cached_ - t);
      for (int64_t j = 0; j + 8 <= count; j += 8) groups.push_back(t + j);
    }
    constexpr int KG = kKeyGroups<G>;
    size_t g = 0;
    for (; g + KG <= groups.size(); g += KG) ScoreKeyGroups<KG>(groups, g);
    for (; g < groups.size(); ++g) ScoreKeyGroups<1>(groups, g);
  }

  // The cached positions outside the full groups: the last block's tail past its last
  // full group of 8, up to the longest row's context, one vector of lanes for every row,
  // stored for each row's own positions only. A lane's score is the same FMA chain over
  // the head elements in order as in a full group (lanes past the tail read the block's
  // unused slots, inside its allocation, and are never stored).
  void ScoreTailGroup() {
    if (max_cached_ == 0) return;
    const int64_t last = (max_cached_ - 1) / bs_ * bs_;
    const int64_t t0 = last + (max_cached_ - last) / 8 * 8;
    if (t0 == max_cached_) return;
    const T* k = KeyLanes(t0);
    __m256 acc[G];
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < hd_; ++d) {
      const __m256 kd = Load8(k + int64_t{d} * bs_);
#pragma GCC unroll 16
      for (int i = 0; i < G; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(q_[i] + d), kd, acc[i]);
    }
    const __m256 scale = _mm256_set1_ps(a_.scale);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i) {
      const int64_t own = std::clamp<int64_t>(n_cached_[i] - t0, 0, 8);
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(own)), lane);
      _mm256_maskstore_ps(s_[i] + t0, m, _mm256_mul_ps(acc[i], scale));
    }
  }

  // Row i's own (predictive) keys, f32 and contiguous, one FMA chain each.
  void ScoreOwnKeys(int i) {
    for (int64_t t = n_cached_[i]; t < n_[i]; ++t) {
      const float* k = OwnRow(a_.pred_k, i, t);
      float acc = 0.0f;
      for (int d = 0; d < hd_; ++d) acc = std::fma(q_[i][d], k[d], acc);
      s_[i][t] = acc * a_.scale;
    }
  }

  // out = sum over positions, in order, of p_t * v_t: the positions every row attends
  // together block by block, then each row's own remainder. Each block's values are
  // summed in passes of kPassElements head elements (the accumulators of G rows fit the
  // registers), every pass over the block while its 4 KiB sit in L1; between blocks and
  // passes the accumulators wait in `out` (exact: floats stored and reloaded), so each
  // element still takes its positions in order from zero. Passes over the whole context
  // instead read each value row's lines in separate sweeps, and waited on memory.
  void SumValues() {
    int64_t t = 0;
    while (t < min_cached_) {
      const int64_t t1 = std::min<int64_t>(min_cached_, t + bs_);
      if (t1 < min_cached_) PrefetchBlock(ValueRow(t1));
      for (int c0 = 0; c0 < hd_; c0 += kPassElements<G>) SumBlock(c0, t, t1);
      t = t1;
    }
    for (int c0 = 0; c0 < hd_; c0 += kPassElements<G>) SumRemainders(c0);
  }

  // The next block's values, head_dim x block_size elements (contiguous), asked for while
  // this one is summed: each block is a page of its own, which the hardware prefetchers
  // enter only after a miss (a one-row attention ran 12% faster with the requests).
  void PrefetchBlock(const T* first) const {
    const char* p = reinterpret_cast<const char*>(first);
    const int64_t bytes = int64_t{hd_} * bs_ * static_cast<int64_t>(sizeof(T));
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }

  float* Out(int i) const { return a_.out + (r0_ + i) * a_.out_stride + int64_t{h_} * hd_; }

  template <int V>
  void LoadAcc(int c0, bool zero, __m256 (&acc)[G][V]) const {
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i)
#pragma GCC unroll 16
      for (int e = 0; e < V; ++e) acc[i][e] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(Out(i) + c0 + 8 * e);
  }
  template <int V>
  void StoreAcc(int c0, const __m256 (&acc)[G][V]) const {
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i)
#pragma GCC unroll 16
      for (int e = 0; e < V; ++e) _mm256_storeu_ps(Out(i) + c0 + 8 * e, acc[i][e]);
  }

  // Elements [c0, c0 + kPassElements) over positions [t0, t1) of one block, every row.
  void SumBlock(int c0, int64_t t0, int64_t t1) {
    constexpr int V = kPassElements<G> / 8;
    __m256 acc[G][V];
    LoadAcc<V>(c0, t0 == 0, acc);
    const T* v = ValueRow(t0) + c0;
    for (int64_t t = t0; t < t1; ++t, v += hd_) {
      __m256 ve[V];
#pragma GCC unroll 16
      for (int e = 0; e < V; ++e) ve[e] = Load8(v + 8 * e);
#pragma GCC unroll 16
      for (int i = 0; i < G; ++i) {
        const __m256 p = _mm256_broadcast_ss(s_[i] + t);
#pragma GCC unroll 16
        for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, ve[e], acc[i][e]);
      }
    }
    StoreAcc<V>(c0, acc);
  }

  // Elements [c0, c0 + kPassElements): each row's positions from min_cached_ on (cached,
  // then its own rows').
  void SumRemainders(int c0) {
    constexpr int V = kPassElements<G> / 8;
    __m256 acc[G][V];
    LoadAcc<V>(c0, min_cached_ == 0, acc);
#pragma GCC unroll 16
    for (int i = 0; i < G; ++i) {
      for (int64_t u = min_cached_; u < n_[i]; ++u) {
        const __m256 p = _mm256_set1_ps(s_[i][u]);
        if (u < n_cached_[i]) {
          const T* v = ValueRow(u) + c0;
#pragma GCC unroll 16
          for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, Load8(v + 8 * e), acc[i][e]);
        } else {
          const float* v = OwnRow(a_.pred_v, i, u) + c0;
#pragma GCC unroll 16
          for (int e = 0; e < V; ++e) acc[i][e] = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8 * e), acc[i][e]);
        }
      }
    }
    StoreAcc<V>(c0, acc);
  }

  const PagedAttentionArgs& a_;
  const int64_t r0_;
  const int h_, hd_, bs_, kv_head_;
  const int32_t* const table_;
  const float* q_[G];
  int64_t n_cached_[G], n_[G];
  int64_t max_cached_ = 0, min_cached_ = INT64_MAX;
  float* s_[G];
};

template <typename T>
void AttendGroup(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch) {
  switch (count) {
    case 8: return RowGroup<T, 8>(a, r0, h, scratch).Run();
    case 7: return RowGroup<T, 7>(a, r0, h, scratch).Run();
    case 6: return RowGroup<T, 6>(a, r0, h, scratch).Run();
    case 5: return RowGroup<T, 5>(a, r0, h, scratch).Run();
    case 4: return RowGroup<T, 4>(a, r0, h, scratch).Run();
    case 3: return RowGroup<T, 3>(a, r0, h, scratch).Run();
    case 2: return RowGroup<T, 2>(a, r0, h, scratch).Run();
    default: return RowGroup<T, 1>(a, r0, h, scratch).Run();
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
