// CUDA runtime and cuBLAS errors as absl::Status, so device failures travel the
// same error path as every other engine failure instead of aborting the process.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace crossreg::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  // Out-of-memory is the one failure a caller can act on (smaller cache, batch).
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

inline absl::Status CublasStatus(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusName(err), " (", cublasGetStatusString(err), ")"));
}

}  // namespace crossreg::cuda

// Returns from the enclosing function on a CUDA / cuBLAS failure; `what` names the call.
#define CROSSREG_CUDA_RETURN_IF_ERROR(expr, what)                                 \
  do {                                                                            \
    if (absl::Status _cuda_status = ::crossreg::cuda::CudaStatus((expr), (what)); \
        !_cuda_status.ok())                                                       \
      return _cuda_status;                                                        \
  } while (0)

#define CROSSREG_CUBLAS_RETURN_IF_ERROR(expr, what)                                 \
  do {                                                                              \
    if (absl::Status _cublas_status = ::crossreg::cuda::CublasStatus((expr), (what)); \
        !_cublas_status.ok())                                                       \
      return _cublas_status;                                                        \
  } while (0)
