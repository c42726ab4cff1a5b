// Launchers of the CUDA backend's kernels. Plain types only (no Abseil) so the .cu
// files stay light; every pointer is device memory, every launch goes on `stream`
// and returns the launch error (asynchronous faults surface at the next sync).
// Each kernel's CPU reference is named beside it; tests/gpu checks each pair.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace crossreg::cuda {

using Bf16 = __nv_bfloat16;

// The largest head_dim the attention kernel holds in registers (8 values a lane).
inline constexpr int kMaxHeadDim = 256;

// out[r] = f32(table[tokens[r]]), table (vocab, hidden) bf16.   CPU: cpu::EmbeddingRow.
cudaError_t LaunchEmbeddingGather(const Bf16* table, int hidden, const int32_t* tokens, int rows, float* out,
                                  cudaStream_t stream);

// Per row of n: out = weight * (x / sqrt(mean(x²) + eps)).   CPU: cpu::RmsNorm.
cudaError_t LaunchRmsNorm(const float* x, const float* weight, int rows, int n, float eps, float* out,
                          cudaStream_t stream);

// In place, NeoX/HF pairs (i, i + head_dim/2) of each head, angle float(positions[r]) *
// inv_freq[i]. Row r starts at x + r * row_stride.   CPU: cpu::ApplyRope.
cudaError_t LaunchRope(float* x, int rows, int64_t row_stride, int num_heads, int head_dim,
                       const int32_t* positions, const float* inv_freq, cudaStream_t stream);

// gate_up rows are [gate (width) | up (width)]; out (rows, width) = silu(gate) * up.
// CPU: cpu::SwiGlu.
cudaError_t LaunchSwiGlu(const float* gate_up, int rows, int width, float* out, cudaStream_t stream);

// out[i] += x[i] (the residual stream).   CPU: cpu::AddInPlace.
cudaError_t LaunchAddInPlace(float* out, const float* x, int64_t n, cudaStream_t stream);

// y[r][0, width) += bias, rows of stride `stride` (Qwen2's q/k/v bias).   CPU: cpu::AddInPlace.
cudaError_t LaunchAddBias(float* y, int rows, int width, int64_t stride, const float* bias, cudaStream_t stream);

// y = bf16(x), round to nearest even (the GEMM input).   CPU: F32ToBf16.
cudaError_t LaunchCastToBf16(const float* x, Bf16* y, int64_t n, cudaStream_t stream);

// dst[i] = src[rows[i]][0, width), src rows of stride src_stride.   CPU: a row copy.
cudaError_t LaunchGatherRows(const float* src, int64_t src_stride, int width, const int32_t* rows, int count,
                             float* dst, cudaStream_t stream);

// dst[rows[i]][0, width) += src[i], dst rows of stride dst_stride. `rows` has no repeats.
cudaError_t LaunchScatterAddRows(const float* src, int width, const int32_t* rows, int count, float* dst,
                                 int64_t dst_stride, cudaStream_t stream);

// Writes each row's K and V (columns [k_col, k_col+kv_dim) and [v_col, ...) of `qkv`)
// to the paged cache at slots[r] (control rows), or, where slots[r] < 0 (predictive
// rows), to row r of the forward's scratch pred_k / pred_v.   CPU: the copy in
// CpuBackend::RunLayer.
cudaError_t LaunchStoreKv(const float* qkv, int rows, int64_t row_stride, int k_col, int v_col, int kv_dim,
                          const int32_t* slots, float* k_cache, float* v_cache, float* pred_k, float* pred_v,
                          cudaStream_t stream);

// Ragged paged attention: one thread block per (row, head), online softmax over the
// positions the row attends. Row r attends num_cached[r] positions of its sequence's
// paged cache (block_tables + table_offset[r]), then num_own[r] rows of its
// predictive group (group_rows + group_begin[r], scratch K/V rows). Control rows:
// num_cached = position + 1, num_own = 0. GQA: head h reads KV head h / (H / H_kv).
// CPU: cpu::PagedAttention (engine/cpu/paged_attention.h), the CPU backend's own attention.
struct PagedAttentionParams {
  const float* q = nullptr;  // (rows, q_stride); head h at column h * head_dim
  int64_t q_stride = 0;
  const float* k_cache = nullptr;  // this layer: [slot][kv_dim]
  const float* v_cache = nullptr;
  const float* pred_k = nullptr;  // [row][kv_dim], predictive rows only
  const float* pred_v = nullptr;
  const int32_t* block_tables = nullptr;  // all rows' sequences' tables, concatenated
  const int32_t* table_offset = nullptr;  // per row
  const int32_t* num_cached = nullptr;    // per row
  const int32_t* num_own = nullptr;       // per row
  const int32_t* group_begin = nullptr;   // per row, into group_rows
  const int32_t* group_rows = nullptr;    // predictive row indices grouped by sequence
  float* out = nullptr;  // (rows, out_stride)
  int64_t out_stride = 0;
  int rows = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // <= kMaxHeadDim
  int block_size = 0;
  float scale = 0.0f;  // 1/sqrt(head_dim)
};
cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream);

// Deterministic uniform fill in [-scale, scale) (+ offset) from a counter hash: the
// benchmark's random weights, made on the device.
cudaError_t LaunchFillUniformBf16(Bf16* x, int64_t n, float offset, float scale, uint64_t seed,
                                  cudaStream_t stream);
cudaError_t LaunchFillUniformF32(float* x, int64_t n, float offset, float scale, uint64_t seed,
                                 cudaStream_t stream);

}  // namespace crossreg::cuda
