// FP8 (e4m3) weights: quantization at load, the decode GEMV that reads them, and the
// dequantization that wider forwards use before cuBLAS. At batch 1 a decode step streams
// every weight once, so half the bytes is close to half the time; the LM head and the
// embedding stay bf16.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/gemv_common.cuh"
#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kQuantizeThreads = 256;
constexpr int kWarps = 8;
constexpr int kPiecesInFlight = 2;  // 16-byte pieces of weights per lane in flight (16 codes each)

__global__ void __launch_bounds__(kQuantizeThreads) QuantizeRowsFp8Kernel(const Bf16* __restrict__ w, int64_t in,
                                                                          uint8_t* __restrict__ codes,
                                                                          float* __restrict__ scale) {
  const int64_t row = blockIdx.x;
  const Bf16* src = w + row * in;
  float amax = 0.0f;
  for (int64_t k = threadIdx.x; k < in; k += kQuantizeThreads) amax = fmaxf(amax, fabsf(__bfloat162float(src[k])));
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  __shared__ float warp_max[kQuantizeThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int i = 0; i < kQuantizeThreads / 32; ++i) amax = fmaxf(amax, warp_max[i]);
  // The same IEEE divisions as the CPU twin (nvcc divides correctly rounded by default).
  const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
  if (threadIdx.x == 0) scale[row] = s;
  for (int64_t k = threadIdx.x; k < in; k += kQuantizeThreads) {
    codes[row * in + k] = __nv_cvt_float_to_fp8(__bfloat162float(src[k]) / s, __NV_SATFINITE, __NV_E4M3);
  }
}

// Two e4m3 codes (the lower address in the low byte) as two floats.
__device__ __forceinline__ float2 Fp8x2ToFloat2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
  return __half22float2(__half2(h));
}

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32) GemvFp8Kernel(const Bf16* __restrict__ x, int in,
                                                             const uint8_t* __restrict__ codes,
                                                             const float* __restrict__ scale, int out, float* y,
                                                             int64_t ldy, float beta) {
  const int o = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= out) return;
  const int pieces = in / 16;  // 16 codes = 16 bytes of weights, 32 bytes of each x row
  const uint4* w_row = reinterpret_cast<const uint4*>(codes + static_cast<int64_t>(o) * in);
  const uint4* x_rows = reinterpret_cast<const uint4*>(x);
  const int x_pieces = in / 8;
  float acc[kRows] = {};
  for (int c0 = lane; c0 < pieces; c0 += 32 * kPiecesInFlight) {
    uint4 wv[kPiecesInFlight];
    LoadStreamedPieces(w_row, c0, pieces, wv);
#pragma unroll
    for (int u = 0; u < kPiecesInFlight; ++u) {
      const int c = c0 + 32 * u;
      if (c >= pieces) break;
      const uint32_t wp[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
      float wf[16];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = Fp8x2ToFloat2(static_cast<uint16_t>(wp[i] & 0xffffu));
        const float2 b = Fp8x2ToFloat2(static_cast<uint16_t>(wp[i] >> 16));
        wf[4 * i] = a.x;
        wf[4 * i + 1] = a.y;
        wf[4 * i + 2] = b.x;
        wf[4 * i + 3] = b.y;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint4 xa = __ldg(x_rows + static_cast<int64_t>(r) * x_pieces + 2 * c);
        const uint4 xb = __ldg(x_rows + static_cast<int64_t>(r) * x_pieces + 2 * c + 1);
        const uint32_t xp[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          acc[r] = fmaf(wf[2 * i], Bf16Low(xp[i]), acc[r]);
          acc[r] = fmaf(wf[2 * i + 1], Bf16High(xp[i]), acc[r]);
        }
      }
    }
  }
  StoreColumn(acc, lane, scale[o], y, ldy, o, beta);
}

__global__ void DequantizeFp8Kernel(const uint8_t* __restrict__ codes, const float* __restrict__ scale, int64_t in,
                                    int64_t n, Bf16* __restrict__ w) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(codes[i]), __NV_E4M3);
    w[i] = __float2bfloat16_rn(__half2float(__half(h)) * scale[i / in]);
  }
}

}  // namespace

cudaError_t LaunchQuantizeRowsFp8(const Bf16* w, int64_t out, int64_t in, uint8_t* codes, float* scale,
                                  cudaStream_t stream) {
  if (out <= 0 || in <= 0 || out > INT32_MAX) return cudaErrorInvalidValue;
  QuantizeRowsFp8Kernel<<<static_cast<unsigned>(out), kQuantizeThreads, 0, stream>>>(w, in, codes, scale);
  return cudaGetLastError();
}

bool GemvFp8Fits(const Bf16* x, int64_t rows, int64_t in, const uint8_t* codes) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(codes);
  return rows >= 1 && rows <= kMaxGemvFp8Rows && in % 16 == 0 && addresses % 16 == 0;
}

cudaError_t LaunchGemvFp8(const Bf16* x, int rows, int in, const uint8_t* codes, const float* scale, int out, float* y,
                          int64_t ldy, float beta, cudaStream_t stream) {
  if (!GemvFp8Fits(x, rows, in, codes) || out <= 0 || ldy < out) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps));
  switch (rows) {
    case 1: GemvFp8Kernel<1><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 2: GemvFp8Kernel<2><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 3: GemvFp8Kernel<3><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 4: GemvFp8Kernel<4><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 5: GemvFp8Kernel<5><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 6: GemvFp8Kernel<6><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    case 7: GemvFp8Kernel<7><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
    default: GemvFp8Kernel<8><<<grid, kWarps * 32, 0, stream>>>(x, in, codes, scale, out, y, ldy, beta); break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDequantizeFp8(const uint8_t* codes, const float* scale, int64_t out, int64_t in, Bf16* w,
                                cudaStream_t stream) {
  if (out <= 0 || in <= 0) return cudaErrorInvalidValue;
  const int64_t n = out * in;
  const int64_t blocks = (n + 255) / 256 < 132 * 32 ? (n + 255) / 256 : 132 * 32;
  DequantizeFp8Kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(codes, scale, in, n, w);
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
