#include "engine/cpu/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/dtype.h"
#include "engine/quant/ggml_blocks.h"

namespace crossreg::cpu {

unsigned char* WeightArena::Take(size_t bytes) {
  const size_t begin = (used_ + 127) / 128 * 128;
  if (begin > buffer_.size() || bytes > buffer_.size() - begin) return nullptr;
  used_ = begin + bytes;
  return buffer_.data() + begin;
}

namespace {
PanelFormat FormatFor(DType dtype) {
  if (IsQuantized(dtype)) return PanelFormat::kQ8;
  return dtype == DType::kF32 ? PanelFormat::kF32 : PanelFormat::kBf16;
}

QuantGroupLayout LayoutFor(DType dtype) {
  const quant::BlockCodes codes = quant::CodesOf(dtype);
  QuantGroupLayout layout;
  layout.sub_block = codes.sub_block;
  layout.has_min = codes.has_min;
  layout.signed_quants = codes.signed_quants;
  // Steps whose int16 pair sums (at most 2 * max|q| * 127 each) add up within 32767,
  // capped at the group's steps.
  layout.int16_steps = std::max(1, std::min(codes.sub_block / 4, 32767 / (2 * codes.max_abs_quant * 127)));
  layout.nibbles = !codes.signed_quants && codes.max_abs_quant <= 15 && codes.sub_block % 8 == 0;
  layout.f16_scales = dtype != DType::kIQ4_XS;
  if (quant::HasIntegerSubBlockScales(dtype)) {
    // Unsigned codes (Q6_K's q6 in 0..63 with its offset as a min), one float step per
    // super-block.
    const int max_code = dtype == DType::kQ6_K ? 63 : dtype == DType::kQ3_K ? 7 : codes.max_abs_quant;
    layout.super_block = 256;
    layout.signed_quants = false;
    layout.has_min = true;
    layout.int16_steps = std::max(1, std::min(codes.sub_block / 4, 32767 / (2 * max_code * 127)));
    layout.nibbles = max_code <= 63 && codes.sub_block % 8 == 0;
    layout.high_bits = !layout.nibbles ? 0 : max_code > 31 ? 2 : max_code > 15 ? 1 : 0;
    layout.min_shift = dtype == DType::kQ6_K ? 5 : dtype == DType::kQ3_K ? 2 : 0;
    layout.f16_scales = false;  // the super-block's d and dmin stay f32 (packed_weights.h)
  }
  return layout;
}
}  // namespace

void PackedWeights::SetShape(DType source, int64_t out, int64_t in) {
  format_ = FormatFor(source);
  out_ = out;
  in_ = in;
  if (format_ == PanelFormat::kQ8) {
    quant_ = LayoutFor(source);
    k_steps_ = in / quant_.group_inputs();
  } else {
    quant_ = QuantGroupLayout{};
    k_steps_ = format_ == PanelFormat::kF32 ? in : (in + 1) / 2;
  }
}

size_t PackedWeights::StorageBytes() const { return static_cast<size_t>(std::max<int64_t>(bytes(), 64)); }

size_t PackedWeights::PackedBytes(const TensorRef& w) {
  PackedWeights shape;
  shape.SetShape(w.dtype, w.rows(), w.cols());
  return shape.StorageBytes();
}

void PackedWeights::Allocate(DType source, int64_t out, int64_t in, WeightArena* arena) {
  SetShape(source, out, in);
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
  const size_t row_bytes = w.row_bytes();
  const auto* base = static_cast<const unsigned char*>(w.data);
  p.Allocate(w.dtype, out, in, arena);
  auto pack_panels = [&](int64_t begin, int64_t end) {
    if (p.format_ == PanelFormat::kQ8) {
      p.PackQuantizedPanels(w, begin, end);
      return;
    }
    std::unique_ptr<float[]> row(new float[static_cast<size_t>(in)]);
    for (int64_t j = begin; j < end; ++j) {
      unsigned char* dst = p.mutable_panel(j);
      for (int o = 0; o < kPanelWidth; ++o) {
        const int64_t oo = j * kPanelWidth + o;
        if (oo >= out) break;
        ConvertToF32(w.dtype, base + static_cast<size_t>(oo) * row_bytes, row.get(), static_cast<size_t>(in));
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

namespace {
// Code kk of output o (quarter o / 8, lane o % 8) into one sub-block's codes, in the
// layout packed_weights.h describes (codes start zero: nibbles are or-ed in).
void PlaceCode(const QuantGroupLayout& layout, unsigned char* codes, int o, int kk, unsigned char code) {
  const int quarter = o / 8, lane = o % 8, step = kk / 4;
  if (layout.nibbles) {
    unsigned char* q = codes + quarter * layout.quarter_code_bytes();
    const int low = code & 15;
    q[(step / 2) * 32 + lane * 4 + kk % 4] |= static_cast<unsigned char>(step % 2 == 0 ? low : low << 4);
    if (layout.high_bits > 0) {
      q[4 * layout.sub_block + lane * 4 + kk % 4] |= static_cast<unsigned char>((code >> 4) << (layout.high_bits * step));
    }
  } else {
    codes[((step * 4 + quarter) * 8 + lane) * 4 + kk % 4] = code;
  }
}
}  // namespace

void PackedWeights::PackQuantizedPanels(const TensorRef& w, int64_t begin, int64_t end) {
  if (quant_.super_block > 0) {
    PackSuperBlockPanels(w, begin, end);
    return;
  }
  const int64_t block = DTypeBlockElements(w.dtype);
  const int sub = quant_.sub_block;
  const int64_t group_bytes = quant_.group_bytes();
  const size_t row_bytes = w.row_bytes();
  std::vector<int8_t> q(static_cast<size_t>(block));
  std::vector<float> scale(static_cast<size_t>(block / sub)), min(static_cast<size_t>(block / sub));
  for (int64_t j = begin; j < end; ++j) {
    unsigned char* panel = mutable_panel(j);
    for (int o = 0; o < kPanelWidth; ++o) {
      const int64_t oo = j * kPanelWidth + o;
      if (oo >= out_) break;  // padded outputs keep zero quants and scales
      const auto* row = static_cast<const unsigned char*>(w.data) + static_cast<size_t>(oo) * row_bytes;
      for (int64_t b = 0; b < in_ / block; ++b) {
        quant::DecodeBlock(w.dtype, row + static_cast<size_t>(b) * DTypeBlockBytes(w.dtype), q.data(), scale.data(),
                           min.data());
        for (int64_t s = 0; s < block / sub; ++s) {
          const int64_t g = (b * block) / sub + s;
          unsigned char* group = panel + g * group_bytes;
          for (int kk = 0; kk < sub; ++kk) {
            PlaceCode(quant_, group, o, kk, static_cast<unsigned char>(q[static_cast<size_t>(s * sub + kk)]));
          }
          unsigned char* scales = group + quant_.code_bytes();
          auto put = [&](int at, float v) {
            if (quant_.f16_scales) {
              // Exact: these formats' scales and mins are f16 values (tests compare every
              // kernel bitwise with a reference that reads them from the file).
              const uint16_t h = F32ToF16(v);
              std::memcpy(scales + 2 * at, &h, sizeof h);
            } else {
              std::memcpy(scales + 4 * at, &v, sizeof v);
            }
          };
          put(o, scale[static_cast<size_t>(s)]);
          if (quant_.has_min) put(kPanelWidth + o, min[static_cast<size_t>(s)]);
        }
      }
    }
  }
}

void PackedWeights::PackSuperBlockPanels(const TensorRef& w, int64_t begin, int64_t end) {
  const int sub = quant_.sub_block;
  const int n = quant_.sub_blocks();
  const int64_t group_bytes = quant_.group_bytes();
  const size_t row_bytes = w.row_bytes();
  uint8_t q[256];
  int16_t sc[16], m[16];
  for (int64_t j = begin; j < end; ++j) {
    unsigned char* panel = mutable_panel(j);
    for (int o = 0; o < kPanelWidth; ++o) {
      const int64_t oo = j * kPanelWidth + o;
      if (oo >= out_) break;  // padded outputs keep zero quants and scales
      const auto* row = static_cast<const unsigned char*>(w.data) + static_cast<size_t>(oo) * row_bytes;
      for (int64_t g = 0; g < k_steps_; ++g) {
        float d, dmin;
        quant::DecodeSuperBlock(w.dtype, row + static_cast<size_t>(g) * DTypeBlockBytes(w.dtype), q, sc, m, &d, &dmin);
        unsigned char* group = panel + g * group_bytes;
        for (int s = 0; s < n; ++s) {
          unsigned char* codes = group + s * quant_.code_bytes();
          for (int kk = 0; kk < sub; ++kk) PlaceCode(quant_, codes, o, kk, q[s * sub + kk]);
          // Every format's integer scales fit a signed byte and its mins an unsigned one
          // (quant::DecodeSuperBlock).
          group[quant_.int_scale_at(s, o)] = static_cast<unsigned char>(static_cast<int8_t>(sc[s]));
          if (quant_.min_shift == 0) group[quant_.int_min_at(s, o)] = static_cast<unsigned char>(m[s]);
        }
        auto* scales = reinterpret_cast<float*>(group + quant_.super_scales_offset());
        scales[o] = d;
        scales[kPanelWidth + o] = dmin;
      }
    }
  }
}

PackedWeights PackedWeights::PackF32(const float* w, int64_t out, int64_t in) {
  return Pack(TensorRef{DType::kF32, {out, in}, w});
}

}  // namespace crossreg::cpu
