// The GPU state one backend owns: the device it runs on, one stream every kernel and
// GEMM of a forward is issued on, the cuBLAS handle bound to that stream and
// cuBLAS's workspace. No globals: two backends (or tests) get two contexts.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/cuda/device_buffer.h"

namespace crossreg::cuda {

class CudaContext {
 public:
  // Selects `device`, creates the stream and the cuBLAS handle.
  static absl::StatusOr<std::unique_ptr<CudaContext>> Create(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  const cudaDeviceProp& properties() const { return properties_; }

  // Makes this context's device current on the calling thread (cheap when it already is).
  absl::Status Activate() const;
  // Waits for everything issued on the stream; reports asynchronous kernel errors.
  absl::Status Synchronize() const;

 private:
  CudaContext() = default;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaDeviceProp properties_{};
  // Given to cuBLAS explicitly so its allocation is owned here, sized once.
  DeviceBuffer<unsigned char> cublas_workspace_;
};

// The reason no device is usable, or OK.
absl::Status CheckCudaDevice(int device);

}  // namespace crossreg::cuda
