// The GEMMs of a forward, row-major in the engine's convention y = x · Wᵀ with W
// stored (out, in) as a PyTorch linear weight. cuBLAS is column-major, so each call
// computes yᵀ = W · xᵀ: W's row-major (out, in) buffer is the column-major (in, out)
// matrix taken transposed, and x / y need no transposition.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/kernels.h"

namespace crossreg::cuda {

// y (rows, out; row stride ldy, f32) = beta·y + x (rows, in; bf16) · w (out, in; bf16)ᵀ,
// accumulated in f32. Up to kMaxGemvRows rows (decode) run the GEMV kernel, more cuBLAS.
absl::Status GemmBf16(const CudaContext& ctx, const Bf16* x, int64_t rows, int64_t in, const Bf16* w, int64_t out,
                      float* y, int64_t ldy, float beta = 0.0f);

// The same product with a layer's weight in either format (device_weights.h): bf16 as
// GemmBf16; FP8 through the FP8 GEMV up to kMaxGemvFp8Rows rows, wider forwards (prefill,
// verify batches) by dequantizing w into `scratch` (w.out · w.in elements) for cuBLAS.
struct DeviceLinear;
absl::Status GemmLinear(const CudaContext& ctx, const Bf16* x, int64_t rows, const DeviceLinear& w, float* y,
                        int64_t ldy, float beta, Bf16* scratch);

}  // namespace crossreg::cuda
