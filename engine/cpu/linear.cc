#include "engine/cpu/linear.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/cpu_features.h"

namespace crossreg::cpu {
namespace {

// Loads element i of a weight row as float.
inline float WeightAt(DType t, const void* row, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(row)[i];
    case DType::kF16: return F16ToF32(static_cast<const uint16_t*>(row)[i]);
    case DType::kBF16: return Bf16ToF32(static_cast<const uint16_t*>(row)[i]);
  }
  return 0.0f;
}

// Portable path: converts one weight row to f32 once, then dots it with every row.
// Eight partial sums let the compiler vectorise without reassociating.
void LinearRangeScalar(const TensorRef& w, const float* x, int64_t rows, float* y,
                       int64_t o_begin, int64_t o_end) {
  const int64_t in = w.cols();
  const int64_t out = w.rows();
  const size_t esize = DTypeSize(w.dtype);
  std::vector<float> wrow(static_cast<size_t>(in));
  for (int64_t o = o_begin; o < o_end; ++o) {
    const void* src = static_cast<const char*>(w.data) + static_cast<size_t>(o * in) * esize;
    for (int64_t i = 0; i < in; ++i) wrow[i] = WeightAt(w.dtype, src, i);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in;
      float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t i = 0;
      for (; i + 8 <= in; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] += wrow[i + j] * xr[i + j];
      }
      float tail = 0.0f;
      for (; i < in; ++i) tail += wrow[i] * xr[i];
      y[r * out + o] = ((part[0] + part[1]) + (part[2] + part[3])) +
                       ((part[4] + part[5]) + (part[6] + part[7])) + tail;
    }
  }
}

}  // namespace

void LinearReference(const TensorRef& w, const float* x, int64_t rows, float* y) {
  const int64_t in = w.cols();
  const int64_t out = w.rows();
  const size_t esize = DTypeSize(w.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const void* src = static_cast<const char*>(w.data) + static_cast<size_t>(o * in) * esize;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += double(WeightAt(w.dtype, src, i)) * x[r * in + i];
      y[r * out + o] = static_cast<float>(acc);
    }
  }
}

void LinearRange(const TensorRef& w, const float* x, int64_t rows, float* y, int64_t o_begin,
                 int64_t o_end) {
  if (DetectedSimdLevel() == SimdLevel::kAvx512) {
    internal::LinearRangeAvx512(w, x, rows, y, o_begin, o_end);
  } else {
    LinearRangeScalar(w, x, rows, y, o_begin, o_end);
  }
}

void Linear(const TensorRef& w, const float* x, int64_t rows, float* y, ThreadPool& pool) {
  const int64_t out = w.rows();
  const int64_t in = w.cols();
  // Below ~64K multiply-adds a second thread costs more than it saves.
  if (out * in * rows < (1 << 16) || pool.num_threads() == 1) {
    LinearRange(w, x, rows, y, 0, out);
    return;
  }
  // Grain of 16 outputs keeps each thread's weight rows contiguous and tiles whole.
  pool.ParallelFor(out, 16, [&](int64_t b, int64_t e) { LinearRange(w, x, rows, y, b, e); });
}

void LinearShared(const LinearOutput* outputs, int count, const float* x, int64_t rows, ThreadPool& pool) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += outputs[i].w->rows();
  const int64_t in = outputs[0].w->cols();
  if (total * in * rows < (1 << 16) || pool.num_threads() == 1) {
    for (int i = 0; i < count; ++i) LinearRange(*outputs[i].w, x, rows, outputs[i].y, 0, outputs[i].w->rows());
    return;
  }
  // Split the concatenated output features; each chunk maps back onto the layers.
  pool.ParallelFor(total, 16, [&](int64_t b, int64_t e) {
    int64_t offset = 0;
    for (int i = 0; i < count && offset < e; ++i) {
      const int64_t n = outputs[i].w->rows();
      const int64_t lo = std::max(b, offset), hi = std::min(e, offset + n);
      if (lo < hi) LinearRange(*outputs[i].w, x, rows, outputs[i].y, lo - offset, hi - offset);
      offset += n;
    }
  });
}

}  // namespace crossreg::cpu
