#include "engine/cuda/gemm.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_weights.h"

namespace crossreg::cuda {
namespace {
absl::Status CheckDims(int64_t rows, int64_t in, int64_t out, int64_t ldy) {
  if (rows > INT_MAX || in > INT_MAX || out > INT_MAX || ldy > INT_MAX || ldy < out) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM: dimensions rows ", rows, " in ", in, " out ", out,
                                                   " ldy ", ldy, " outside cuBLAS's 32-bit range"));
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status GemmBf16(const CudaContext& ctx, const Bf16* x, int64_t rows, int64_t in, const Bf16* w, int64_t out,
                      float* y, int64_t ldy, float beta) {
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckDims(rows, in, out, ldy); !s.ok()) return s;
  if (GemvBf16Fits(x, rows, in, w)) {
    CROSSREG_CUDA_RETURN_IF_ERROR(LaunchGemvBf16(x, static_cast<int>(rows), static_cast<int>(in), w,
                                                 static_cast<int>(out), y, ldy, beta, ctx.stream()),
                                  "GEMV (bf16 x bf16 -> f32)");
    return absl::OkStatus();
  }
  const float alpha = 1.0f;
  CROSSREG_CUBLAS_RETURN_IF_ERROR(
      cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                   static_cast<int>(in), &alpha, w, CUDA_R_16BF, static_cast<int>(in), x, CUDA_R_16BF,
                   static_cast<int>(in), &beta, y, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (bf16 x bf16 -> f32)");
  return absl::OkStatus();
}

absl::Status GemmLinear(const CudaContext& ctx, const Bf16* x, int64_t rows, const DeviceLinear& w, float* y,
                        int64_t ldy, float beta, Bf16* scratch) {
  if (!w.is_fp8()) return GemmBf16(ctx, x, rows, w.in, w.bf16.data(), w.out, y, ldy, beta);
  if (rows == 0) return absl::OkStatus();
  if (absl::Status s = CheckDims(rows, w.in, w.out, ldy); !s.ok()) return s;
  if (GemvFp8Fits(x, rows, w.in, w.fp8.data())) {
    CROSSREG_CUDA_RETURN_IF_ERROR(LaunchGemvFp8(x, static_cast<int>(rows), static_cast<int>(w.in), w.fp8.data(),
                                                w.scale.data(), static_cast<int>(w.out), y, ldy, beta, ctx.stream()),
                                  "GEMV (bf16 x fp8 -> f32)");
    return absl::OkStatus();
  }
  if (scratch == nullptr) return absl::InternalError("FP8 GEMM wider than the GEMV without a dequantization scratch");
  CROSSREG_CUDA_RETURN_IF_ERROR(LaunchDequantizeFp8(w.fp8.data(), w.scale.data(), w.out, w.in, scratch, ctx.stream()),
                                "FP8 dequantization");
  return GemmBf16(ctx, x, rows, w.in, scratch, w.out, y, ldy, beta);
}

}  // namespace crossreg::cuda
