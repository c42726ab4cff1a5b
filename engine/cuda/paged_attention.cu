// Ragged paged attention (decode-style, flash-decoding within a block): one thread
// block per (row, head). Each warp walks every kWarps-th attended position with its
// own online softmax; lanes split head_dim, so a key or value row is read coalesced.
// The warps' partial (max, sum, accumulator) are merged once at the end.
#include <cuda_runtime.h>

#include <cmath>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kDimsPerLane = kMaxHeadDim / 32;

__global__ void __launch_bounds__(kWarps * 32) PagedAttentionKernel(PagedAttentionParams p) {
  const int r = blockIdx.x;
  const int h = blockIdx.y;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int hd = p.head_dim;
  const int kv_dim = p.num_kv_heads * hd;
  const int64_t kv_off = static_cast<int64_t>(h / (p.num_heads / p.num_kv_heads)) * hd;

  // This lane's dims: lane, lane + 32, ... (compile-time indexed registers).
  float q[kDimsPerLane];
  float acc[kDimsPerLane];
  const float* q_row = p.q + r * p.q_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    q[j] = d < hd ? q_row[d] : 0.0f;
    acc[j] = 0.0f;
  }

  const int n_cached = p.num_cached[r];
  const int n = n_cached + p.num_own[r];
  const int32_t* table = p.block_tables + p.table_offset[r];
  const int32_t* group = p.group_rows + p.group_begin[r];
  float m = -INFINITY;  // running max of the scores this warp has seen
  float l = 0.0f;       // running Σ exp(score - m)
  for (int t = warp; t < n; t += kWarps) {
    const float* key;
    const float* value;
    if (t < n_cached) {
      const int64_t slot = static_cast<int64_t>(table[t / p.block_size]) * p.block_size + t % p.block_size;
      key = p.k_cache + slot * kv_dim + kv_off;
      value = p.v_cache + slot * kv_dim + kv_off;
    } else {
      const int64_t other = group[t - n_cached];
      key = p.pred_k + other * kv_dim + kv_off;
      value = p.pred_v + other * kv_dim + kv_off;
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) {
      const int d = lane + 32 * j;
      if (d < hd) s += q[j] * key[d];
    }
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    s *= p.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // exp(-inf) = 0 on the first position
    const float weight = expf(s - m_new);
    l = l * correction + weight;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) {
      const int d = lane + 32 * j;
      acc[j] = acc[j] * correction + (d < hd ? weight * value[d] : 0.0f);
    }
    m = m_new;
  }

  __shared__ float warp_max[kWarps];
  __shared__ float warp_sum[kWarps];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < hd) warp_acc[warp][d] = acc[j];
  }
  __syncthreads();
  // n >= 1 always (a row attends itself), so the overall max is finite; warps that
  // saw no position contribute exp(-inf) = 0.
  float overall = warp_max[0];
  for (int w = 1; w < kWarps; ++w) overall = fmaxf(overall, warp_max[w]);
  float denom = 0.0f;
  float factor[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    factor[w] = warp_sum[w] > 0.0f ? expf(warp_max[w] - overall) : 0.0f;
    denom += warp_sum[w] * factor[w];
  }
  float* out = p.out + r * p.out_stride + static_cast<int64_t>(h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += warp_acc[w][d] * factor[w];
    out[d] = v / denom;
  }
}

}  // namespace

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.head_dim > kMaxHeadDim || p.head_dim <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.num_heads));
  PagedAttentionKernel<<<grid, kWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
