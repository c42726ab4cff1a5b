// y = x · Wᵀ for a batch of rows: the one kernel that streams the weights.
// Each output element is accumulated in the same order whatever the number of rows
// in the batch, so a row's result does not depend on which other rows ran with it.
#pragma once

#include <cstdint>

#include "engine/cpu/thread_pool.h"
#include "engine/tensor.h"

namespace crossreg::cpu {

// w: (out, in) in F32/F16/BF16. x: (rows, in) f32, row stride `in`.
// y: (rows, out) f32, row stride `out`. Parallel over output features.
void Linear(const TensorRef& w, const float* x, int64_t rows, float* y, ThreadPool& pool);

// Several linear layers reading the same x (Q/K/V, gate/up) in one parallel region:
// one synchronisation instead of one per layer. y_i = x · W_iᵀ.
struct LinearOutput {
  const TensorRef* w;
  float* y;
};
void LinearShared(const LinearOutput* outputs, int count, const float* x, int64_t rows, ThreadPool& pool);

// The same over outputs [o_begin, o_end) only, on the calling thread.
void LinearRange(const TensorRef& w, const float* x, int64_t rows, float* y, int64_t o_begin,
                 int64_t o_end);

// Plain loops, the reference the SIMD kernels are tested against.
void LinearReference(const TensorRef& w, const float* x, int64_t rows, float* y);

namespace internal {
// Implemented in linear_avx512.cc; call only when the CPU has AVX-512.
void LinearRangeAvx512(const TensorRef& w, const float* x, int64_t rows, float* y,
                       int64_t o_begin, int64_t o_end);
}  // namespace internal

}  // namespace crossreg::cpu
