// The CPU reference of LaunchPagedAttention: the same ragged-row contract on host
// arrays, written the plain way (scores, softmax, weighted sum) as CpuBackend does.
#pragma once

#include <cstdint>
#include <vector>

namespace crossreg::cuda {

struct PagedAttentionHostInputs {
  std::vector<float> q;  // (rows, q_stride)
  int64_t q_stride = 0;
  std::vector<float> k_cache, v_cache;  // [slot][kv_dim]
  std::vector<float> pred_k, pred_v;    // [row][kv_dim]
  std::vector<int32_t> block_tables, table_offset, num_cached, num_own, group_begin, group_rows;
  int rows = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 0.0f;
};

// Returns (rows, num_heads * head_dim).
std::vector<float> PagedAttentionReference(const PagedAttentionHostInputs& in);

}  // namespace crossreg::cuda
