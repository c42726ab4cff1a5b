#include "engine/cuda/cuda_context.h"

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace crossreg::cuda {
namespace {
// cuBLAS's recommendation for Hopper is 32 MiB; smaller GPUs need less but it is cheap.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
}  // namespace

absl::Status CheckCudaDevice(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA backend: no CUDA device is available (cudaGetDeviceCount: ",
        err == cudaSuccess ? "0 devices" : cudaGetErrorString(err),
        "); use the CPU backend or run on a machine with an NVIDIA GPU"));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA backend: device ", device, " requested but only ", count, " present"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(int device) {
  if (absl::Status s = CheckCudaDevice(device); !s.ok()) return s;
  std::unique_ptr<CudaContext> ctx(new CudaContext());
  ctx->device_ = device;
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&ctx->properties_, device), "cudaGetDeviceProperties");
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking),
                                "cudaStreamCreate");
  CROSSREG_CUBLAS_RETURN_IF_ERROR(cublasCreate(&ctx->cublas_), "cublasCreate");
  CROSSREG_CUBLAS_RETURN_IF_ERROR(cublasSetStream(ctx->cublas_, ctx->stream_), "cublasSetStream");
  if (absl::Status s = ctx->cublas_workspace_.Allocate(kCublasWorkspaceBytes); !s.ok()) return s;
  CROSSREG_CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(ctx->cublas_, ctx->cublas_workspace_.data(), ctx->cublas_workspace_.bytes()),
      "cublasSetWorkspace");
  // Plain f32 GEMMs (the LoRA path) stay IEEE f32: no silent TF32.
  CROSSREG_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(ctx->cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  return ctx;
}

CudaContext::~CudaContext() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaContext::Activate() const {
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  return absl::OkStatus();
}

absl::Status CudaContext::Synchronize() const {
  CROSSREG_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return absl::OkStatus();
}

}  // namespace crossreg::cuda
