// The AVX2 attention path behind engine/cpu/paged_attention.h, for the CPU backend's
// block-transposed cache: up to kMaxGroupRowsAvx2 query vectors of one sequence and kv
// head at a time (a prefill's rows for one head, or a decode or verify step's rows for
// the query heads of a kv head), sharing each key and value load (alone, a vector's
// kernel is load-bound). 8 cached keys are scored per vector straight from the
// cache's key lanes (no copy of a key into a row), and the values are summed block by
// block with the accumulators in registers. Compiled with -mavx2 -mfma; called only
// after run-time detection.
//
// Invariance (lossless = AR rests on it): a key's score is one FMA chain over the head
// elements in order, whether the key is in a full group of 8 (a vector lane), in a
// block's tail or a predictive row's own key (std::fma, the same operation), so a score
// never depends on the position's place in a block or on which rows share the forward;
// the value sum takes the positions in order, whichever rows share the pass and whichever
// thread sums which head elements. A row's result is the same in any batch, any group and
// on any number of threads.
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

// G query vectors of one sequence (one block table) and one kv head: a unit's rows x
// heads (engine/cpu/paged_attention_internal.h). The vectors share each key and value
// load; each vector's arithmetic is the one-vector kernel's, in the same order.
template <typename T, int G>
class RowGroup {
 public:
  RowGroup(const PagedAttentionArgs& a, const AttentionUnit& u, float* scores, int64_t stride)
      : a_(a), hd_(a.head_dim), bs_(a.block_size), kv_head_(u.h0 / (a.num_heads / a.num_kv_heads)),
        table_(a.block_tables + a.table_offset[u.r0]) {
    for (int i = 0; i < G; ++i) {
      const int64_t r = u.row(i);
      const int h = u.head(i);
      row_[i] = r;
      q_[i] = a.q + r * a.q_stride + int64_t{h} * hd_;
      out_[i] = a.out + r * a.out_stride + int64_t{h} * hd_;
      n_cached_[i] = a.num_cached[r];
      n_[i] = n_cached_[i] + a.num_own[r];
      max_cached_ = std::max(max_cached_, n_cached_[i]);
      min_cached_ = std::min(min_cached_, n_cached_[i]);
      s_[i] = scores + i * stride;
    }
  }

  // Everything, in order, on this thread.
  void Run() {
    ScoreCachedKeys(0, FullKeyGroups(), true);
    for (int i = 0; i < G; ++i) ScoreOwnKeysAndSoftmax(i);
    SumElements(0, hd_);
  }

  // Groups of 8 cached keys [g0, g1) (group g: positions [8g, 8g + 8), inside one block
  // as block_size is a multiple of 8), and with `tail` the cached keys past the last full
  // group. A vector's own keys are scored after every cached key (ScoreOwnKeysAndSoftmax):
  // a full group past a vector's context writes over its own keys' places.
  void ScoreCachedKeys(int64_t g0, int64_t g1, bool tail) {
    constexpr int KG = kKeyGroups<G>;
    int64_t g = g0;
    for (; g + KG <= g1; g += KG) ScoreKeyGroups<KG>(g);
    for (; g < g1; ++g) ScoreKeyGroups<1>(g);
    if (tail) ScoreTailGroup();
  }
  // Full groups of 8 cached keys up to the longest context: a vector past its own context
  // scores keys it then ignores.
  int64_t FullKeyGroups() const { return max_cached_ / 8; }

  void ScoreOwnKeysAndSoftmax(int i) {
    ScoreOwnKeys(i);
    Softmax(s_[i], n_[i]);
  }

  // out = sum over positions, in order, of p_t * v_t, for head elements [e0, e1)
  // (multiples of kPassElements<G>): the positions every vector attends together block by
  // block, then each vector's own remainder. Each block's values are summed in passes of
  // kPassElements head elements (the accumulators of G vectors fit the registers), every
  // pass over the block while its lines sit in L1; between blocks and passes the
  // accumulators wait in `out` (exact: floats stored and reloaded), so each element still
  // takes its positions in order from zero, whichever elements a call takes. Passes over
  // the whole context instead read each value row's lines in separate sweeps, and waited
  // on memory.
  void SumElements(int e0, int e1) {
    int64_t t = 0;
    while (t < min_cached_) {
      const int64_t t1 = std::min<int64_t>(min_cached_, t + bs_);
      if (t1 < min_cached_) PrefetchBlock(ValueRow(t1), e0, e1);
      for (int c0 = e0; c0 < e1; c0 += kPassElements<G>) SumBlock(c0, t, t1);
      t = t1;
    }
    for (int c0 = e0; c0 < e1; c0 += kPassElements<G>) SumRemainders(c0);
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
  // Vector i's own (predictive) key or value for position t >= its cached context.
  const float* OwnRow(const float* base, int i, int64_t t) const {
    const int64_t row = a_.group_rows[a_.group_begin[row_[i]] + (t - n_cached_[i])];
    return base + row * int64_t{a_.num_kv_heads} * hd_ + int64_t{kv_head_} * hd_;
  }

  // KG full groups of 8 keys from group g on, for every vector.
  template <int KG>
  void ScoreKeyGroups(int64_t g) {
    __m256 acc[G][KG];
    const T* k[KG];
#pragma GCC unroll 16
    for (int j = 0; j < KG; ++j) k[j] = KeyLanes(8 * (g + j));
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
      for (int j = 0; j < KG; ++j) _mm256_storeu_ps(s_[i] + 8 * (g + j), _mm256_mul_ps(acc[i][j], scale));
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

  // Elements [e0, e1) of the next block's values (block_size rows of head_dim, contiguous),
  // asked for while this one is summed: each block is a page of its own, which the
  // hardware prefetchers enter only after a miss (a one-row attention ran 12% faster
  // with the requests).
  void PrefetchBlock(const T* first, int e0, int e1) const {
    const char* p = reinterpret_cast<const char*>(first);
    const int64_t row_bytes = int64_t{hd_} * static_cast<int64_t>(sizeof(T));
    const int64_t b0 = int64_t{e0} * static_cast<int64_t>(sizeof(T)) / 64 * 64;
    const int64_t b1 = int64_t{e1} * static_cast<int64_t>(sizeof(T));
    for (int64_t row = 0; row < bs_; ++row) {
      for (int64_t off = b0; off < b1; off += 64) _mm_prefetch(p + row * row_bytes + off, _MM_HINT_T0);
    }
  }

  float* Out(int i) const { return out_[i]; }

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
  const int hd_, bs_, kv_head_;
  const int32_t* const table_;
  int64_t row_[G];
  const float* q_[G];
  float* out_[G];
  int64_t n_cached_[G], n_[G];
  int64_t max_cached_ = 0, min_cached_ = INT64_MAX;
  float* s_[G];
};

// Calls fn(group) with the unit's RowGroup (G = its vectors).
template <typename T, typename Fn>
void WithGroup(const PagedAttentionArgs& a, const AttentionUnit& u, float* scores, int64_t stride, Fn fn) {
  switch (u.vectors()) {
    case 8: { RowGroup<T, 8> g(a, u, scores, stride); return fn(g); }
    case 7: { RowGroup<T, 7> g(a, u, scores, stride); return fn(g); }
    case 6: { RowGroup<T, 6> g(a, u, scores, stride); return fn(g); }
    case 5: { RowGroup<T, 5> g(a, u, scores, stride); return fn(g); }
    case 4: { RowGroup<T, 4> g(a, u, scores, stride); return fn(g); }
    case 3: { RowGroup<T, 3> g(a, u, scores, stride); return fn(g); }
    case 2: { RowGroup<T, 2> g(a, u, scores, stride); return fn(g); }
    default: { RowGroup<T, 1> g(a, u, scores, stride); return fn(g); }
  }
}

int PassElements(int vectors) {
  switch (vectors) {
    case 1: return kPassElements<1>;
    case 2: return kPassElements<2>;
    case 3: case 4: case 5: case 6: return kPassElements<6>;
    default: return kPassElements<8>;
  }
}

bool Supported(const PagedAttentionArgs& a) {
  return a.kv_layout == KvLayout::kBlockTransposed && a.head_dim % 64 == 0 && a.block_size % 8 == 0;
}

// Keys scored per item of a unit's first phase: 16 groups of 8.
constexpr int64_t kScoreItemGroups = 16;

template <typename T>
class UnitKernelAvx2Impl final : public UnitKernel {
 public:
  // 16: as units the default model's T(12) at 400 positions ran faster than as row
  // groups, T(16) level (docs/benchmarks.md, "Xeon AMX: verify-forward cost").
  int MaxRows() const override { return 16; }
  int MaxVectors() const override { return kMaxGroupRowsAvx2; }
  int64_t ScoreItems(const PagedAttentionArgs& a, const AttentionUnit& u) const override {
    return std::max<int64_t>(1, (u.max_cached(a) / 8 + kScoreItemGroups - 1) / kScoreItemGroups);
  }
  // Items [first, last) of ScoreItems; the last item adds the tail past the full groups.
  void Score(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
             int64_t last) const override {
    const bool tail = last == ScoreItems(a, u);
    WithGroup<T>(a, u, s.scores, s.stride, [&](auto& g) {
      const int64_t groups = g.FullKeyGroups();
      g.ScoreCachedKeys(std::min(groups, first * kScoreItemGroups), std::min(groups, last * kScoreItemGroups), tail);
    });
  }
  void OwnKeysAndSoftmax(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s,
                         int i) const override {
    WithGroup<T>(a, u, s.scores, s.stride, [&](auto& g) { g.ScoreOwnKeysAndSoftmax(i); });
  }
  // Passes of PassElements head elements.
  int64_t SumItems(const PagedAttentionArgs& a, const AttentionUnit& u) const override {
    return a.head_dim / PassElements(u.vectors());
  }
  void Sum(const PagedAttentionArgs& a, const AttentionUnit& u, const UnitScratch& s, int64_t first,
           int64_t last) const override {
    const int pass = PassElements(u.vectors());
    WithGroup<T>(a, u, s.scores, s.stride, [&](auto& g) {
      g.SumElements(static_cast<int>(first) * pass, static_cast<int>(last) * pass);
    });
  }
};

}  // namespace

bool AttendRowsAvx2(const PagedAttentionArgs& a, int64_t r0, int count, int h, std::vector<float>& scratch) {
  if (!Supported(a)) return false;
  const AttentionUnit unit{r0, count, h, 1};
  int64_t max_n = 0;
  for (int i = 0; i < count; ++i) max_n = std::max<int64_t>(max_n, int64_t{a.num_cached[r0 + i]} + a.num_own[r0 + i]);
  scratch.resize(static_cast<size_t>(count * max_n));
  auto run = [](auto& g) { g.Run(); };
  if (a.cache_element == KvElement::kBf16) {
    WithGroup<uint16_t>(a, unit, scratch.data(), max_n, run);
  } else {
    WithGroup<float>(a, unit, scratch.data(), max_n, run);
  }
  return true;
}

const UnitKernel* UnitKernelAvx2(const PagedAttentionArgs& a) {
  static const UnitKernelAvx2Impl<float> f32;
  static const UnitKernelAvx2Impl<uint16_t> bf16;
  if (!Supported(a)) return nullptr;
  return a.cache_element == KvElement::kBf16 ? static_cast<const UnitKernel*>(&bf16) : &f32;
}

}  // namespace crossreg::cpu::internal
