// A non-owning view of one stored tensor (weights on the host).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace crossreg {

// Shape is row-major, outermost dimension first (PyTorch order): a linear layer's
// weight is (out_features, in_features). GGUF's reversed `ne` order is undone at load.
struct TensorRef {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;

  bool empty() const { return data == nullptr; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return DTypeBytes(dtype, numel()); }
  // Bytes of one row of a 2-D tensor (quantized rows are whole blocks).
  size_t row_bytes() const { return DTypeBytes(dtype, cols()); }
  int64_t rows() const { return shape.empty() ? 0 : shape.front(); }
  int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace crossreg
