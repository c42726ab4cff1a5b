// The predictive rows' low-rank update, read from and added to the rows where they
// sit: two launches per group of targets that share an input. A gather, two cuBLAS f32
// GEMMs (one with a split-K reduction) and a scatter-add per target would take 25
// launches a layer, bound by launches and memory traffic where the arithmetic is a few
// MFLOP. Kernel times: `scripts/gpu_lease.sh profile` (ncu over crossreg-bench-gpu,
// summed by engine/cuda/tools/ncu_summary.py); docs/benchmarks.md, "GPU: NVIDIA H100
// and H200", has the LoRA update's time a layer.
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 8;
constexpr int kShrinkRanks = 8;
constexpr int kWideExpandRows = 32;

// Which target of the group global index `index` falls in, and the index within it.
__device__ __forceinline__ int Locate(const int* sizes, int targets, int& index) {
  int t = 0;
  while (t + 1 < targets && index >= sizes[t]) {
    index -= sizes[t];
    ++t;
  }
  return t;
}

// Block (8 A rows of the group's concatenated ranks, 8 predictive rows, K split): each
// thread multiplies its strided share of the split's inputs for all 64 (row, rank)
// pairs, so every value read feeds 8 products (a warp per pair reads 46 MB from L2
// per call at 8B shapes; a block per A row reads one value per product at a time,
// several times slower still). Sums reduce in a fixed tree and the K splits are added in split
// order by the expand kernel, so a row's result does not depend on the other rows.
__global__ void LoraShrinkKernel(LoraGroup g, const float* x, int64_t x_stride, int in, const int32_t* rows, int count,
                                 float* mid_parts, int total_rank, int k_chunk) {
  const int j0 = blockIdx.x * kShrinkRanks;
  const int i0 = blockIdx.y * kRowsPerBlock;
  const int n_ranks = min(kShrinkRanks, total_rank - j0);
  const int n_rows = min(kRowsPerBlock, count - i0);
  const float* a[kShrinkRanks];
  const float* xr[kRowsPerBlock];
#pragma unroll
  for (int jj = 0; jj < kShrinkRanks; ++jj) {
    int j = j0 + min(jj, n_ranks - 1);
    const int t = Locate(g.rank, g.targets, j);
    a[jj] = g.a[t] + static_cast<int64_t>(j) * in;
  }
#pragma unroll
  for (int ii = 0; ii < kRowsPerBlock; ++ii) xr[ii] = x + static_cast<int64_t>(rows[i0 + min(ii, n_rows - 1)]) * x_stride;
  float acc[kRowsPerBlock][kShrinkRanks] = {};
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(in, k_begin + k_chunk);
  for (int k = k_begin + threadIdx.x; k < k_end; k += blockDim.x) {
    float av[kShrinkRanks], xv[kRowsPerBlock];
#pragma unroll
    for (int jj = 0; jj < kShrinkRanks; ++jj) av[jj] = a[jj][k];
#pragma unroll
    for (int ii = 0; ii < kRowsPerBlock; ++ii) xv[ii] = xr[ii][k];
#pragma unroll
    for (int ii = 0; ii < kRowsPerBlock; ++ii) {
#pragma unroll
      for (int jj = 0; jj < kShrinkRanks; ++jj) acc[ii][jj] += xv[ii] * av[jj];
    }
  }
  __shared__ float partial[kThreads / 32][kRowsPerBlock * kShrinkRanks];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int ii = 0; ii < kRowsPerBlock; ++ii) {
#pragma unroll
    for (int jj = 0; jj < kShrinkRanks; ++jj) {
      float v = acc[ii][jj];
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][ii * kShrinkRanks + jj] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < kRowsPerBlock * kShrinkRanks) {
    const int ii = threadIdx.x / kShrinkRanks, jj = threadIdx.x % kShrinkRanks;
    if (ii < n_rows && jj < n_ranks) {
      float sum = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) sum += partial[w][threadIdx.x];
      mid_parts[(static_cast<int64_t>(blockIdx.z) * count + i0 + ii) * total_rank + j0 + jj] = sum;
    }
  }
}

// Thread (output column of the group, row tile): the tile's mid rows sit in shared
// memory; each thread reads its B row once for up to kTileRows rows and adds
// scale · mid · Bᵀ in place (rows are distinct). A row's sum runs over the ranks in
// order whatever the tile, so its result does not depend on the other rows.
template <int kTileRows>
__global__ void LoraExpandKernel(LoraGroup g, const float* mid_parts, int k_splits, int total_rank,
                                 const int32_t* rows, int count, float* y, int64_t ldy, int total_out) {
  extern __shared__ float tile[];  // [kTileRows][total_rank]: the shrink's K splits summed in order
  const int i0 = blockIdx.y * kTileRows;
  const int n_rows = min(kTileRows, count - i0);
  for (int e = threadIdx.x; e < n_rows * total_rank; e += blockDim.x) {
    float sum = 0.0f;
#pragma unroll 16
    for (int s = 0; s < k_splits; ++s) sum += mid_parts[(static_cast<int64_t>(s) * count + i0) * total_rank + e];
    tile[e] = sum;
  }
  __syncthreads();
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= total_out) return;
  const int t = Locate(g.out, g.targets, c);
  int rank_offset = 0;
  for (int s = 0; s < t; ++s) rank_offset += g.rank[s];
  const int rank = g.rank[t];
  const float* b = g.b[t] + static_cast<int64_t>(c) * rank;
  float acc[kTileRows] = {};
  const float* m = tile + rank_offset;
  int j = 0;
  if (rank % 4 == 0) {  // B rows are 16-byte aligned: four ranks a load
    for (; j < rank; j += 4) {
      const float4 b4 = *reinterpret_cast<const float4*>(b + j);
#pragma unroll
      for (int i = 0; i < kTileRows; ++i) {
        const float* mi = m + i * total_rank + j;
        acc[i] += mi[0] * b4.x;
        acc[i] += mi[1] * b4.y;
        acc[i] += mi[2] * b4.z;
        acc[i] += mi[3] * b4.w;
      }
    }
  }
  for (; j < rank; ++j) {
    const float bj = b[j];
#pragma unroll
    for (int i = 0; i < kTileRows; ++i) acc[i] += m[i * total_rank + j] * bj;
  }
#pragma unroll
  for (int i = 0; i < kTileRows; ++i) {
    if (i < n_rows) y[static_cast<int64_t>(rows[i0 + i]) * ldy + g.col[t] + c] += g.scale[t] * acc[i];
  }
}

bool Valid(const LoraGroup& g) {
  if (g.total_rank() > kMaxLoraGroupRank) return false;
  if (g.targets <= 0 || g.targets > kMaxLoraTargetsPerGroup) return false;
  for (int t = 0; t < g.targets; ++t) {
    if (g.rank[t] <= 0 || g.out[t] <= 0 || g.a[t] == nullptr || g.b[t] == nullptr) return false;
  }
  return true;
}

}  // namespace

int LoraShrinkSplits(int in) { return std::max(1, std::min(16, in / 512)); }

cudaError_t LaunchLoraShrink(const LoraGroup& g, const float* x, int64_t x_stride, int in, const int32_t* rows,
                             int count, float* mid, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!Valid(g)) return cudaErrorInvalidValue;
  const int total_rank = g.total_rank();
  const int splits = LoraShrinkSplits(in);
  const int k_chunk = (in + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>((total_rank + kShrinkRanks - 1) / kShrinkRanks),
                  static_cast<unsigned>((count + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(splits));
  LoraShrinkKernel<<<grid, kThreads, 0, stream>>>(g, x, x_stride, in, rows, count, mid, total_rank, k_chunk);
  return cudaGetLastError();
}

cudaError_t LaunchLoraExpand(const LoraGroup& g, const float* mid, int in, const int32_t* rows, int count, float* y,
                             int64_t ldy, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!Valid(g)) return cudaErrorInvalidValue;
  int total_out = 0;
  for (int t = 0; t < g.targets; ++t) total_out += g.out[t];
  // A Cross-Regression step's 30-odd predictive rows in one row tile read B once (eight
  // rows a tile read it four times), where the tile's mid rows fit 48 KB of shared memory.
  const bool wide = count > kRowsPerBlock && sizeof(float) * kWideExpandRows * g.total_rank() <= 48 * 1024;
  const int tile_rows = wide ? kWideExpandRows : kRowsPerBlock;
  const dim3 grid(static_cast<unsigned>((total_out + kThreads - 1) / kThreads),
                  static_cast<unsigned>((count + tile_rows - 1) / tile_rows));
  const size_t tile_bytes = sizeof(float) * tile_rows * static_cast<size_t>(g.total_rank());
  if (wide) {
    LoraExpandKernel<kWideExpandRows><<<grid, kThreads, tile_bytes, stream>>>(g, mid, LoraShrinkSplits(in),
                                                                              g.total_rank(), rows, count, y, ldy,
                                                                              total_out);
  } else {
    LoraExpandKernel<kRowsPerBlock><<<grid, kThreads, tile_bytes, stream>>>(g, mid, LoraShrinkSplits(in),
                                                                            g.total_rank(), rows, count, y, ldy,
                                                                            total_out);
  }
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
