#include "engine/cpu/packed_weights.h"

#include <algorithm>
#include <memory>

#include "engine/cpu/thread_pool.h"
#include "engine/dtype.h"

namespace crossreg::cpu {

unsigned char* WeightArena::Take(size_t bytes) {
  const size_t begin = (used_ + 127) / 128 * 128;
  if (begin > buffer_.size() || bytes > buffer_.size() - begin) return nullptr;
  used_ = begin + bytes;
  return buffer_.data() + begin;
}

namespace {
PanelFormat FormatFor(DType dtype) { return dtype == DType::kF32 ? PanelFormat::kF32 : PanelFormat::kBf16; }
}  // namespace

void PackedWeights::SetShape(PanelFormat format, int64_t out, int64_t in) {
  format_ = format;
  out_ = out;
  in_ = in;
  k_steps_ = format == PanelFormat::kF32 ? in : (in + 1) / 2;
}

size_t PackedWeights::StorageBytes() const { return static_cast<size_t>(std::max<int64_t>(bytes(), 64)); }

size_t PackedWeights::PackedBytes(const TensorRef& w) {
  PackedWeights shape;
  shape.SetShape(FormatFor(w.dtype), w.rows(), w.cols());
  return shape.StorageBytes();
}

void PackedWeights::Allocate(PanelFormat format, int64_t out, int64_t in, WeightArena* arena) {
  SetShape(format, out, in);
  const size_t bytes = StorageBytes();
  // Zeros either way: the padding must be.
  data_ = arena != nullptr ? arena->Take(bytes) : nullptr;
  if (data_ == nullptr) {
    owned_ = LargeBuffer(bytes);
    data_ = owned_.data();
  }
}

PackedWeights PackedWeights::Pack(const TensorRef& w, ThreadPool* pool, WeightArena* arena) {
  PackedWeights p;
  const int64_t out = w.rows();
  const int64_t in = w.cols();
  const size_t esize = DTypeSize(w.dtype);
  const auto* base = static_cast<const unsigned char*>(w.data);
  p.Allocate(FormatFor(w.dtype), out, in, arena);
  auto pack_panels = [&](int64_t begin, int64_t end) {
    std::unique_ptr<float[]> row(new float[static_cast<size_t>(in)]);
    for (int64_t j = begin; j < end; ++j) {
      unsigned char* dst = p.mutable_panel(j);
      for (int o = 0; o < kPanelWidth; ++o) {
        const int64_t oo = j * kPanelWidth + o;
        if (oo >= out) break;
        ConvertToF32(w.dtype, base + static_cast<size_t>(oo * in) * esize, row.get(), static_cast<size_t>(in));
        if (p.format_ == PanelFormat::kF32) {
          auto* f = reinterpret_cast<float*>(dst);
          for (int64_t k = 0; k < in; ++k) f[k * kPanelWidth + o] = row[static_cast<size_t>(k)];
        } else {
          auto* h = reinterpret_cast<uint16_t*>(dst);
          for (int64_t k = 0; k < in; ++k) {
            // Step k/2 holds 32 outputs x 2 values: [o][k & 1].
            h[(k / 2) * (2 * kPanelWidth) + 2 * o + (k & 1)] = F32ToBf16(row[static_cast<size_t>(k)]);
          }
        }
      }
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(p.panels(), 1, pack_panels);
  } else {
    pack_panels(0, p.panels());
  }
  return p;
}

PackedWeights PackedWeights::PackF32(const float* w, int64_t out, int64_t in) {
  return Pack(TensorRef{DType::kF32, {out, in}, w});
}

}  // namespace crossreg::cpu
