// The per-element and per-row kernels of the Llama block. All math in f32; bf16 only
// where a GEMM reads it. Grid-stride loops so one launch shape fits any size.
#include <cuda_bf16.h>

#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kThreads = 256;

int BlocksFor(int64_t n) {
  // Enough blocks to cover n once, capped: grid-stride loops take the rest.
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

__global__ void EmbeddingGatherKernel(const Bf16* table, int hidden, const int32_t* tokens, int rows, float* out) {
  const int r = blockIdx.x;
  const Bf16* src = table + static_cast<int64_t>(tokens[r]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[static_cast<int64_t>(r) * hidden + i] = __bfloat162float(src[i]);
}

__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  // Only warp 0 reads the partials: another warp reading partial[0] while warp 0 writes the
  // total there is a race (harmless, its value unused, but racecheck rightly reports it).
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    v = lane < warps ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// One block per row. Decode forwards have a handful of rows, so the block is wide
// (up to 1024 threads) and each thread's loads are issued together: a 256-thread
// block walking 4096 values one dependent load at a time is bound by each load's
// latency.
__global__ void RmsNormKernel(const float* x, const float* weight, int n, float eps, float* out, Bf16* out_bf16) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * n;
  float ss = 0.0f;
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += row[i] * row[i];
  ss = BlockSum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);  // not rsqrtf: keep CPU parity
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = weight[i] * (scale * row[i]);
    dst[i] = v;
    if (out_bf16 != nullptr) out_bf16[static_cast<int64_t>(blockIdx.x) * n + i] = __float2bfloat16_rn(v);
  }
}

// One thread per (row, head, pair).
__global__ void RopeKernel(float* x, int rows, int64_t row_stride, int num_heads, int head_dim,
                           const int32_t* positions, const float* inv_freq) {
  const int half = head_dim / 2;
  const int64_t total = static_cast<int64_t>(rows) * num_heads * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int h = static_cast<int>((t / half) % num_heads);
    const int64_t r = t / (static_cast<int64_t>(half) * num_heads);
    // Angle in f32 and full-precision sincos, as the CPU computes it.
    const float angle = static_cast<float>(positions[r]) * inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
    float* v = x + r * row_stride + static_cast<int64_t>(h) * head_dim;
    const float x0 = v[i], x1 = v[i + half];
    v[i] = x0 * c - x1 * s;
    v[i + half] = x0 * s + x1 * c;
  }
}

// RopeKernel over the Q and K heads of a qkv row, and StoreKvKernel in the same pass:
// the thread that rotates a K pair writes it, and the matching V pair, to the row's
// cache slot (or predictive scratch). One launch instead of two per layer.
__device__ __forceinline__ void Put(float* dst, float v) { *dst = v; }
__device__ __forceinline__ void Put(Bf16* dst, float v) { *dst = __float2bfloat16_rn(v); }

template <typename KvT>
__global__ void RopeStoreKvKernel(float* qkv, int rows, int64_t row_stride, int num_heads, int num_kv_heads,
                                  int head_dim, const int32_t* positions, const float* inv_freq, const int32_t* slots,
                                  KvT* k_cache, KvT* v_cache, float* pred_k, float* pred_v) {
  const int half = head_dim / 2;
  const int heads = num_heads + num_kv_heads;
  const int kv_dim = num_kv_heads * head_dim;
  const int64_t total = static_cast<int64_t>(rows) * heads * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int h = static_cast<int>((t / half) % heads);
    const int64_t r = t / (static_cast<int64_t>(half) * heads);
    const float angle = static_cast<float>(positions[r]) * inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
    float* row = qkv + r * row_stride;
    float* v = row + static_cast<int64_t>(h) * head_dim;
    const float x0 = v[i], x1 = v[i + half];
    const float y0 = x0 * c - x1 * s;
    const float y1 = x0 * s + x1 * c;
    v[i] = y0;
    v[i + half] = y1;
    if (h < num_heads) continue;
    const int64_t col = static_cast<int64_t>(h - num_heads) * head_dim;
    const int32_t slot = slots[r];
    const float* v_src = row + static_cast<int64_t>(num_heads + num_kv_heads) * head_dim;
    if (slot >= 0) {
      KvT* k_dst = k_cache + static_cast<int64_t>(slot) * kv_dim + col;
      KvT* v_dst = v_cache + static_cast<int64_t>(slot) * kv_dim + col;
      Put(k_dst + i, y0);
      Put(k_dst + i + half, y1);
      Put(v_dst + i, v_src[col + i]);
      Put(v_dst + i + half, v_src[col + i + half]);
    } else {
      float* k_dst = pred_k + r * kv_dim + col;
      float* v_dst = pred_v + r * kv_dim + col;
      k_dst[i] = y0;
      k_dst[i + half] = y1;
      v_dst[i] = v_src[col + i];
      v_dst[i + half] = v_src[col + i + half];
    }
  }
}

__global__ void SwiGluKernel(const float* gate_up, int rows, int width, float* out, Bf16* out_bf16) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / width;
    const int64_t i = t % width;
    const float g = gate_up[r * 2 * width + i];
    const float u = gate_up[r * 2 * width + width + i];
    const float v = g / (1.0f + expf(-g)) * u;
    out[t] = v;
    if (out_bf16 != nullptr) out_bf16[t] = __float2bfloat16_rn(v);
  }
}

__global__ void AddInPlaceKernel(float* out, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] += x[i];
}

__global__ void AddBiasKernel(float* y, int rows, int width, int64_t stride, const float* bias) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[(t / width) * stride + t % width] += bias[t % width];
}

__global__ void CastToBf16Kernel(const float* x, Bf16* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void GatherRowsKernel(const float* src, int64_t src_stride, int width, const int32_t* rows, float* dst) {
  const float* s = src + static_cast<int64_t>(rows[blockIdx.x]) * src_stride;
  float* d = dst + static_cast<int64_t>(blockIdx.x) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] = s[i];
}

__global__ void ScatterAddRowsKernel(const float* src, int width, const int32_t* rows, float* dst, int64_t dst_stride) {
  const float* s = src + static_cast<int64_t>(blockIdx.x) * width;
  float* d = dst + static_cast<int64_t>(rows[blockIdx.x]) * dst_stride;
  for (int i = threadIdx.x; i < width; i += blockDim.x) d[i] += s[i];
}

// One block per row: K and V of a row are contiguous kv_dim runs, copied coalesced.
template <typename KvT>
__global__ void StoreKvKernel(const float* qkv, int64_t row_stride, int k_col, int v_col, int kv_dim,
                              const int32_t* slots, KvT* k_cache, KvT* v_cache, float* pred_k, float* pred_v) {
  const int r = blockIdx.x;
  const float* k = qkv + r * row_stride + k_col;
  const float* v = qkv + r * row_stride + v_col;
  const int32_t slot = slots[r];
  if (slot >= 0) {
    KvT* k_dst = k_cache + static_cast<int64_t>(slot) * kv_dim;
    KvT* v_dst = v_cache + static_cast<int64_t>(slot) * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
      Put(k_dst + i, k[i]);
      Put(v_dst + i, v[i]);
    }
  } else {
    float* k_dst = pred_k + static_cast<int64_t>(r) * kv_dim;
    float* v_dst = pred_v + static_cast<int64_t>(r) * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
      k_dst[i] = k[i];
      v_dst[i] = v[i];
    }
  }
}

// SplitMix64 of the element index: independent of the launch shape, so a fill is
// reproducible on any GPU.
__device__ float UniformAt(uint64_t seed, int64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
}

__global__ void FillUniformBf16Kernel(Bf16* x, int64_t n, float offset, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16_rn(offset + scale * UniformAt(seed, i));
}

__global__ void FillUniformF32Kernel(float* x, int64_t n, float offset, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = offset + scale * UniformAt(seed, i);
}

}  // namespace

cudaError_t LaunchEmbeddingGather(const Bf16* table, int hidden, const int32_t* tokens, int rows, float* out,
                                  cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  EmbeddingGatherKernel<<<rows, kThreads, 0, stream>>>(table, hidden, tokens, rows, out);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const float* x, const float* weight, int rows, int n, float eps, float* out,
                          cudaStream_t stream, Bf16* out_bf16) {
  if (rows == 0) return cudaSuccess;
  // About 4 values a thread, 128 to 1024 threads (BlockSum holds 32 warps).
  int threads = 128;
  while (threads < 1024 && threads * 4 < n) threads *= 2;
  RmsNormKernel<<<rows, threads, 0, stream>>>(x, weight, n, eps, out, out_bf16);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* x, int rows, int64_t row_stride, int num_heads, int head_dim,
                       const int32_t* positions, const float* inv_freq, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * num_heads * (head_dim / 2);
  if (total == 0) return cudaSuccess;
  RopeKernel<<<BlocksFor(total), kThreads, 0, stream>>>(x, rows, row_stride, num_heads, head_dim, positions, inv_freq);
  return cudaGetLastError();
}

cudaError_t LaunchRopeStoreKv(float* qkv, int rows, int64_t row_stride, int num_heads, int num_kv_heads, int head_dim,
                              const int32_t* positions, const float* inv_freq, const int32_t* slots, KvCacheRef cache,
                              float* pred_k, float* pred_v, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * (num_heads + num_kv_heads) * (head_dim / 2);
  if (total == 0) return cudaSuccess;
  if (cache.element == KvElement::kBf16) {
    RopeStoreKvKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
        qkv, rows, row_stride, num_heads, num_kv_heads, head_dim, positions, inv_freq, slots,
        static_cast<Bf16*>(cache.k), static_cast<Bf16*>(cache.v), pred_k, pred_v);
  } else {
    RopeStoreKvKernel<<<BlocksFor(total), kThreads, 0, stream>>>(
        qkv, rows, row_stride, num_heads, num_kv_heads, head_dim, positions, inv_freq, slots,
        static_cast<float*>(cache.k), static_cast<float*>(cache.v), pred_k, pred_v);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(const float* gate_up, int rows, int width, float* out, cudaStream_t stream,
                         Bf16* out_bf16) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  if (total == 0) return cudaSuccess;
  SwiGluKernel<<<BlocksFor(total), kThreads, 0, stream>>>(gate_up, rows, width, out, out_bf16);
  return cudaGetLastError();
}

cudaError_t LaunchAddInPlace(float* out, const float* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AddInPlaceKernel<<<BlocksFor(n), kThreads, 0, stream>>>(out, x, n);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(float* y, int rows, int width, int64_t stride, const float* bias, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * width;
  if (total == 0) return cudaSuccess;
  AddBiasKernel<<<BlocksFor(total), kThreads, 0, stream>>>(y, rows, width, stride, bias);
  return cudaGetLastError();
}

cudaError_t LaunchCastToBf16(const float* x, Bf16* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  CastToBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const float* src, int64_t src_stride, int width, const int32_t* rows, int count,
                             float* dst, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  GatherRowsKernel<<<count, kThreads, 0, stream>>>(src, src_stride, width, rows, dst);
  return cudaGetLastError();
}

cudaError_t LaunchScatterAddRows(const float* src, int width, const int32_t* rows, int count, float* dst,
                                 int64_t dst_stride, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  ScatterAddRowsKernel<<<count, kThreads, 0, stream>>>(src, width, rows, dst, dst_stride);
  return cudaGetLastError();
}

cudaError_t LaunchStoreKv(const float* qkv, int rows, int64_t row_stride, int k_col, int v_col, int kv_dim,
                          const int32_t* slots, KvCacheRef cache, float* pred_k, float* pred_v, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (cache.element == KvElement::kBf16) {
    StoreKvKernel<<<rows, kThreads, 0, stream>>>(qkv, row_stride, k_col, v_col, kv_dim, slots,
                                                 static_cast<Bf16*>(cache.k), static_cast<Bf16*>(cache.v), pred_k,
                                                 pred_v);
  } else {
    StoreKvKernel<<<rows, kThreads, 0, stream>>>(qkv, row_stride, k_col, v_col, kv_dim, slots,
                                                 static_cast<float*>(cache.k), static_cast<float*>(cache.v), pred_k,
                                                 pred_v);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFillUniformBf16(Bf16* x, int64_t n, float offset, float scale, uint64_t seed,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillUniformBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, offset, scale, seed);
  return cudaGetLastError();
}

cudaError_t LaunchFillUniformF32(float* x, int64_t n, float offset, float scale, uint64_t seed,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillUniformF32Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, offset, scale, seed);
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
