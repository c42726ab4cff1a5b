// y = beta·y + x · Wᵀ for 1-4 rows of x (bf16 weights and inputs, f32 accumulate): the
// decode GEMM, where every weight is read once and the time is the weights' stream. One
// warp per output column: lanes read its weight row in 16-byte pieces, four pieces in
// flight each, and reduce in a fixed tree. cuBLAS reached 2.2-2.8 TB/s on these shapes at
// one row (split-K with a separate reduction kernel for some), against 3.0 TB/s for a
// device-to-device copy.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/gemv_common.cuh"
#include "engine/cuda/kernels.h"

namespace crossreg::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kPiecesInFlight = 4;


template <int kRows>
__global__ void __launch_bounds__(kWarps * 32) GemvBf16Kernel(const Bf16* __restrict__ x, int in,
                                                              const Bf16* __restrict__ w, int out, float* y,
                                                              int64_t ldy, float beta) {
  const int o = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= out) return;
  const int pieces = in / 8;
  const uint4* w_row = reinterpret_cast<const uint4*>(w) + static_cast<int64_t>(o) * pieces;
  const uint4* x_rows = reinterpret_cast<const uint4*>(x);
  float acc[kRows] = {};
  for (int c0 = lane; c0 < pieces; c0 += 32 * kPiecesInFlight) {
    uint4 wv[kPiecesInFlight];
    LoadStreamedPieces(w_row, c0, pieces, wv);
#pragma unroll
    for (int u = 0; u < kPiecesInFlight; ++u) {
      const int c = c0 + 32 * u;
      if (c >= pieces) break;
      const uint32_t wp[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint4 xv = __ldg(x_rows + static_cast<int64_t>(r) * pieces + c);
        const uint32_t xp[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[r] = fmaf(Bf16Low(wp[i]), Bf16Low(xp[i]), acc[r]);
          acc[r] = fmaf(Bf16High(wp[i]), Bf16High(xp[i]), acc[r]);
        }
      }
    }
  }
  StoreColumn(acc, lane, 1.0f, y, ldy, o, beta);
}

}  // namespace

bool GemvBf16Fits(const Bf16* x, int64_t rows, int64_t in, const Bf16* w) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w);
  return rows >= 1 && rows <= kMaxGemvRows && in % 8 == 0 && addresses % 16 == 0;
}

cudaError_t LaunchGemvBf16(const Bf16* x, int rows, int in, const Bf16* w, int out, float* y, int64_t ldy, float beta,
                           cudaStream_t stream) {
  if (!GemvBf16Fits(x, rows, in, w) || out <= 0 || ldy < out) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps));
  switch (rows) {
    case 1: GemvBf16Kernel<1><<<grid, kWarps * 32, 0, stream>>>(x, in, w, out, y, ldy, beta); break;
    case 2: GemvBf16Kernel<2><<<grid, kWarps * 32, 0, stream>>>(x, in, w, out, y, ldy, beta); break;
    case 3: GemvBf16Kernel<3><<<grid, kWarps * 32, 0, stream>>>(x, in, w, out, y, ldy, beta); break;
    default: GemvBf16Kernel<4><<<grid, kWarps * 32, 0, stream>>>(x, in, w, out, y, ldy, beta); break;
  }
  return cudaGetLastError();
}

}  // namespace crossreg::cuda
