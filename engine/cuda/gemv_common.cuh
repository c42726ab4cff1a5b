// What the decode GEMV kernels (gemv_kernels.cu: bf16 weights, fp8_kernels.cu: FP8 weights)
// share: one warp per output column, its weight row streamed in 16-byte pieces with several
// in flight per lane, bf16 activations unpacked from 32-bit words, and a fixed-order warp
// reduction per activation row.
#pragma once

#include <cstdint>

namespace crossreg::cuda {

// Two bf16 values packed in a 32-bit word (the lower address in the low half) as floats:
// a bf16 is the top half of an f32, so the conversion is a shift or a mask.
__device__ __forceinline__ float Bf16Low(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float Bf16High(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// Pieces c0, c0 + 32, ... of a weight row (zero past `pieces`), read once: past the cache.
template <int kInFlight>
__device__ __forceinline__ void LoadStreamedPieces(const uint4* row, int c0, int pieces, uint4 (&out)[kInFlight]) {
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) {
    const int c = c0 + 32 * u;
    out[u] = c < pieces ? __ldcs(row + c) : make_uint4(0, 0, 0, 0);
  }
}

// y[r][o] = beta·y[r][o] + scale · Σ_lanes acc[r], lane 0 writing (fixed reduction tree).
template <int kRows>
__device__ __forceinline__ void StoreColumn(const float (&acc)[kRows], int lane, float scale, float* y, int64_t ldy,
                                            int o, float beta) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = acc[r];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) {
      float* dst = y + r * ldy + o;
      v *= scale;
      *dst = beta == 0.0f ? v : v + beta * *dst;
    }
  }
}

}  // namespace crossreg::cuda
