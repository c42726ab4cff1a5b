#include "engine/cuda/paged_attention_reference.h"

#include "engine/cpu/ops.h"

namespace crossreg::cuda {

std::vector<float> PagedAttentionReference(const PagedAttentionHostInputs& in) {
  const int hd = in.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(in.num_kv_heads) * hd;
  const int64_t qd = static_cast<int64_t>(in.num_heads) * hd;
  const int group = in.num_heads / in.num_kv_heads;
  std::vector<float> out(static_cast<size_t>(in.rows * qd), 0.0f);
  std::vector<float> scores;
  std::vector<const float*> values;
  for (int r = 0; r < in.rows; ++r) {
    const int n_cached = in.num_cached[r];
    const int n = n_cached + in.num_own[r];
    scores.resize(static_cast<size_t>(n));
    values.resize(static_cast<size_t>(n));
    for (int h = 0; h < in.num_heads; ++h) {
      const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
      const float* q = in.q.data() + r * in.q_stride + static_cast<int64_t>(h) * hd;
      for (int t = 0; t < n; ++t) {
        const float* key;
        if (t < n_cached) {
          const int64_t slot =
              int64_t{in.block_tables[static_cast<size_t>(in.table_offset[r] + t / in.block_size)]} * in.block_size +
              t % in.block_size;
          key = in.k_cache.data() + slot * kv_dim + kv_off;
          values[static_cast<size_t>(t)] = in.v_cache.data() + slot * kv_dim + kv_off;
        } else {
          const int64_t other = in.group_rows[static_cast<size_t>(in.group_begin[r] + (t - n_cached))];
          key = in.pred_k.data() + other * kv_dim + kv_off;
          values[static_cast<size_t>(t)] = in.pred_v.data() + other * kv_dim + kv_off;
        }
        scores[static_cast<size_t>(t)] = cpu::Dot(q, key, hd) * in.scale;
      }
      cpu::Softmax(scores.data(), n);
      float* o = out.data() + r * qd + static_cast<int64_t>(h) * hd;
      for (int t = 0; t < n; ++t) {
        for (int d = 0; d < hd; ++d) o[d] += scores[static_cast<size_t>(t)] * values[static_cast<size_t>(t)][d];
      }
    }
  }
  return out;
}

}  // namespace crossreg::cuda
