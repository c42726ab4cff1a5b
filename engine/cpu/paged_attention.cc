#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cpu/thread_pool.h"

namespace crossreg::cpu {
namespace {

// One (row, head): scores over the attended positions, softmax, weighted sum.
void AttendOne(const PagedAttentionArgs& a, int64_t r, int h, std::vector<float>& scores,
               std::vector<const float*>& values) {
  const int hd = a.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(a.num_kv_heads) * hd;
  const int64_t kv_off = static_cast<int64_t>(h / (a.num_heads / a.num_kv_heads)) * hd;
  const float* q = a.q + r * a.q_stride + static_cast<int64_t>(h) * hd;
  const int64_t n_cached = a.num_cached[r];
  const int64_t n = n_cached + a.num_own[r];
  const int32_t* table = a.block_tables + a.table_offset[r];
  scores.resize(static_cast<size_t>(n));
  values.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const float* key;
    if (t < n_cached) {
      const int64_t slot = int64_t{table[t / a.block_size]} * a.block_size + t % a.block_size;
      key = a.k_cache + slot * kv_dim + kv_off;
      values[static_cast<size_t>(t)] = a.v_cache + slot * kv_dim + kv_off;
    } else {
      const int64_t other = a.group_rows[a.group_begin[r] + (t - n_cached)];
      key = a.pred_k + other * kv_dim + kv_off;
      values[static_cast<size_t>(t)] = a.pred_v + other * kv_dim + kv_off;
    }
    scores[static_cast<size_t>(t)] = Dot(q, key, hd) * a.scale;
  }
  Softmax(scores.data(), n);
  float* out = a.out + r * a.out_stride + static_cast<int64_t>(h) * hd;
  std::fill_n(out, hd, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const float* value = values[static_cast<size_t>(t)];
    const float p = scores[static_cast<size_t>(t)];
    for (int d = 0; d < hd; ++d) out[d] += p * value[d];
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a, ThreadPool* pool) {
  const int64_t tasks = int64_t{a.rows} * a.num_heads;
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    thread_local std::vector<const float*> values;
    for (int64_t task = begin; task < end; ++task) {
      AttendOne(a, task / a.num_heads, static_cast<int>(task % a.num_heads), scores, values);
    }
  };
  int64_t cost = 0;  // multiply-adds, roughly: 2 · head_dim per attended position and head
  for (int r = 0; r < a.rows; ++r) cost += 2 * int64_t{a.head_dim} * a.num_heads * (a.num_cached[r] + a.num_own[r]);
  // Below ~64K multiply-adds a second thread costs more in synchronisation than it saves.
  if (pool == nullptr || cost < (1 << 16)) {
    run(0, tasks);
    return;
  }
  pool->ParallelFor(tasks, 1, run);
}

}  // namespace crossreg::cpu
