// Row summaries of the logits on the device (engine/forward_output.h): greedy decoding
// reads an argmax and one logit gap per row, so 12 bytes cross to the host instead of
// the row (513 KB at vocab 128256).
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

// Wide blocks: a verify step has a few dozen rows, and each row's read (vocab floats)
// must keep enough loads in flight on its own SM.
constexpr int kSummaryThreads = 1024;

// (value, index) pairs ordered as the CPU's sequential Argmax picks: the larger value,
// then the lower index. NaN is never larger, so it never wins a comparison.
__device__ __forceinline__ bool Better(float v, int i, float best, int best_i) {
  return v > best || (v == best && i < best_i);
}

// Leaves lane 0 of the warp with the warp's best pair.
__device__ __forceinline__ void WarpBest(float& best, int& best_i) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_down_sync(0xffffffffu, best, offset);
    const int i = __shfl_down_sync(0xffffffffu, best_i, offset);
    if (Better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
}

__global__ void SummarizeLogitRowsKernel(const float* logits, int vocab, const int32_t* rows, const int32_t* tokens,
                                         LogitSummary* out) {
  const float* z = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  // Each thread scans ascending indices, so its first strict maximum is its lowest.
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = z[i];
    if (v > best) {
      best = v;
      best_i = i;
    }
  }
  WarpBest(best, best_i);
  __shared__ float warp_best[32];
  __shared__ int warp_index[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_index[warp] = best_i;
  }
  __syncthreads();
  if (warp != 0) return;
  const int warps = (blockDim.x + 31) / 32;
  best = lane < warps ? warp_best[lane] : -INFINITY;
  best_i = lane < warps ? warp_index[lane] : INT_MAX;
  WarpBest(best, best_i);
  if (lane != 0) return;
  // The sequential scan keeps index 0 when nothing is strictly above z[0]: a NaN at 0,
  // or a row with no value above -inf.
  if (best_i == INT_MAX || isnan(z[0])) best_i = 0;
  LogitSummary s;
  s.argmax = best_i;
  s.max_logit = z[best_i];
  const int32_t token = tokens[blockIdx.x];
  s.token_logit = token >= 0 ? z[token] : s.max_logit;
  out[blockIdx.x] = s;
}

}  // namespace

cudaError_t LaunchSummarizeLogitRows(const float* logits, int vocab, const int32_t* rows, const int32_t* tokens,
                                     int count, LogitSummary* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  SummarizeLogitRowsKernel<<<count, kSummaryThreads, 0, stream>>>(logits, vocab, rows, tokens, out);
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
