#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/paged_attention_internal.h"
#include "engine/cpu/thread_pool.h"

namespace crossreg::cpu {
namespace {

inline float DotKey(const float* q, const float* k, int n) { return Dot(q, k, n); }
inline float DotKey(const float* q, const uint16_t* k, int n) { return DotBf16(q, k, n); }
inline void AddValue(float* out, float p, const float* v, int n) { Axpy(out, p, v, n); }
inline void AddValue(float* out, float p, const uint16_t* v, int n) { AxpyBf16(out, p, v, n); }

// One (row, head): scores over the attended positions, softmax, weighted sum.
template <typename T>
void AttendOne(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scores) {
  const int hd = a.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(a.num_kv_heads) * hd;
  const int64_t kv_off = static_cast<int64_t>(h / (a.num_heads / a.num_kv_heads)) * hd;
  const float* q = a.q + r * a.q_stride + static_cast<int64_t>(h) * hd;
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  auto slot_of = [&](int64_t t) { return int64_t{table[t / a.block_size]} * a.block_size + t % a.block_size; };
  auto own_row = [&](int64_t t) { return int64_t{a.group_rows[a.group_begin[r] + (t - n_cached)]}; };
  scores.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n_cached; ++t) {
    scores[static_cast<size_t>(t)] = DotKey(q, k_cache + slot_of(t) * kv_dim + kv_off, hd) * a.scale;
  }
  for (int64_t t = n_cached; t < n; ++t) {
    scores[static_cast<size_t>(t)] = DotKey(q, a.pred_k + own_row(t) * kv_dim + kv_off, hd) * a.scale;
  }
  Softmax(scores.data(), n);
  float* out = a.out + r * a.out_stride + static_cast<int64_t>(h) * hd;
  std::fill_n(out, hd, 0.0f);
  for (int64_t t = 0; t < n_cached; ++t) {
    AddValue(out, scores[static_cast<size_t>(t)], v_cache + slot_of(t) * kv_dim + kv_off, hd);
  }
  for (int64_t t = n_cached; t < n; ++t) {
    AddValue(out, scores[static_cast<size_t>(t)], a.pred_v + own_row(t) * kv_dim + kv_off, hd);
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, ThreadPool* pool) {
  const bool avx512 = DetectedSimdLevel() >= SimdLevel::kAvx512;
  // Units of work: one row, or (AVX-512, small heads) up to 16 consecutive control rows
  // of one sequence whose contexts grow by one, attended together with rows in lanes.
  struct Unit {
    int64_t first;
    int count;
  };
  std::vector<Unit> units;
  const bool grouping = avx512 && a.head_dim <= internal::kGroupMaxHeadDim;
  for (int64_t r = 0; r < a.rows;) {
    int count = 1;
    if (grouping && a.num_own[r] == 0) {
      while (count < 16 && r + count < a.rows && a.num_own[r + count] == 0 &&
             a.table_offset[r + count] == a.table_offset[r] && a.num_cached[r + count] == a.num_cached[r] + count) {
        ++count;
      }
    }
    units.push_back({r, count});
    r += count;
  }
  const int64_t num_units = static_cast<int64_t>(units.size());
  const int64_t tasks = num_units * a.num_heads;
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t task = begin; task < end; ++task) {
      // Head-major: the units of one head read the same K/V slice, so consecutive
      // tasks find it in L1.
      const int h = static_cast<int>(task / num_units);
      const Unit& u = units[static_cast<size_t>(task % num_units)];
      if (grouping && internal::AttendGroupAvx512(a, u.first, u.count, h, scores)) continue;
      for (int64_t r = u.first; r < u.first + u.count; ++r) {
        if (avx512 && internal::AttendOneAvx512(a, r, h, scores)) continue;
        if (a.cache_element == KvElement::kBf16) {
          AttendOne<uint16_t>(a, r, h, scores);
        } else {
          AttendOne<float>(a, r, h, scores);
        }
      }
    }
  };
  int64_t cost = 0;  // multiply-adds, roughly: 2 · head_dim per attended position and head
  for (int r = 0; r < a.rows; ++r) cost += 2 * int64_t{a.head_dim} * a.num_heads * (a.num_cached[r] + a.num_own[r]);
  // Below ~64K multiply-adds a second thread costs more in synchronisation than it saves.
  if (pool == nullptr || cost < (1 << 16)) {
    run(0, tasks);
    return;
  }
  // Chunks of a few tasks: later rows of a prefill attend more positions.
  pool->ParallelForDynamic(tasks, std::max<int64_t>(1, std::min<int64_t>(num_units, 8)), run);
}

}  // namespace crossreg::cpu
