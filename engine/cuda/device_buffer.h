// One device allocation with an owner: freed in the destructor, movable, never
// copied. Sizes are in elements of T; growth never shrinks (workspaces reuse it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace crossreg::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  // Exactly `count` elements, contents undefined; frees what was held before.
  absl::Status Allocate(size_t count) {
    Release();
    if (count == 0) return absl::OkStatus();
    void* p = nullptr;
    if (cudaError_t err = cudaMalloc(&p, count * sizeof(T)); err != cudaSuccess) {
      return CudaStatus(err, absl::StrCat("cudaMalloc(", count * sizeof(T), " bytes)").c_str());
    }
    data_ = static_cast<T*>(p);
    size_ = count;
    return absl::OkStatus();
  }

  // At least `count` elements; keeps the allocation when it is already large enough.
  absl::Status Reserve(size_t count) { return count <= size_ ? absl::OkStatus() : Allocate(count); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Release() {
    if (data_ != nullptr) cudaFree(data_);  // errors here are sticky ones already reported
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace crossreg::cuda
