// Attention of ragged rows over the paged K/V cache, on the CPU. The CPU backend runs
// it every layer, and it is the reference the CUDA kernel (engine/cuda/kernels.h,
// LaunchPagedAttention) is compared with: one definition of the row contract.
//
// Row r attends, in order: the cached positions [0, num_cached[r]) of its sequence
// (through its block table), then, for predictive rows, num_own[r] rows of its group
// listed at group_rows[group_begin[r] ...] (a fork's shared branch-0 prefix, then its
// own rows up to itself), whose K/V sit in pred_k/pred_v by row index.
#pragma once

#include <cstdint>

namespace crossreg::cpu {

class ThreadPool;

// The cache's element type: f32, or bf16 (half the bytes attention reads).
enum class KvElement { kF32, kBf16 };

// Where a cached key's or value's elements live (keys and values alike).
enum class KvLayout {
  kSlotMajor,        // [slot][kv_dim]: a position's K (V) row is contiguous (the CUDA layout)
  kBlockTransposed,  // the CPU backend's layout (engine/cpu/kv_store.h), per block:
                     // keys [block][kv_head][head_dim][block_size] (element d of the
                     // block's positions contiguous: one vector op scores 16 positions;
                     // key (slot, kv_head, d) at ((block * num_kv_heads + kv_head) *
                     // head_dim + d) * block_size + offset), values
                     // [block][kv_head][block_size][head_dim] (a position's head slice
                     // contiguous: the weighted sum keeps head elements in lanes; value
                     // (slot, kv_head, d) at ((block * num_kv_heads + kv_head) *
                     // block_size + offset) * head_dim + d)
};

struct PagedAttentionArgs {
  const float* q = nullptr;  // (rows, q_stride): head h at column h * head_dim
  int64_t q_stride = 0;
  KvElement cache_element = KvElement::kF32;
  KvLayout kv_layout = KvLayout::kSlotMajor;
  const void* k_cache = nullptr;  // this layer's keys and values, laid out as kv_layout says
  const void* v_cache = nullptr;
  const float* pred_k = nullptr;  // (rows, num_kv_heads * head_dim): predictive rows' K/V, f32
  const float* pred_v = nullptr;
  // Per row (ForwardPlan's arrays).
  const int32_t* block_tables = nullptr;
  const int32_t* table_offset = nullptr;
  const int32_t* num_cached = nullptr;
  const int32_t* num_own = nullptr;
  const int32_t* group_begin = nullptr;
  const int32_t* group_rows = nullptr;
  int rows = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads (grouped-query attention)
  int head_dim = 0;
  int block_size = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
  float* out = nullptr;  // (rows, out_stride): head h at column h * head_dim
  int64_t out_stride = 0;
};

// `pool` may be null (one thread). Work is split into (row group, head) tasks taken in
// dynamic chunks (rows attend contexts of different lengths); on AVX2 and AVX-512, decode
// and verify steps run as units of query vectors split by keys and by head elements
// instead (engine/cpu/paged_attention_internal.h). Every row runs the same arithmetic
// whatever else is in the batch, so its result does not depend on the thread count or on
// the other rows (bitwise).
void PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool);

}  // namespace crossreg::cpu
