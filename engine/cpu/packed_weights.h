// A linear layer's weight packed once, at backend creation, into the layout the CPU
// micro-kernels read: panels of 32 output features, each panel one contiguous stream.
//
//   kF32  (f32 weights):        per k,                     the panel's 32 outputs       128 bytes
//   kBf16 (bf16, f16 weights):  per k-pair (2p, 2p+1),     32 outputs x (w[2p], w[2p+1]) 128 bytes
//
//   kQ8   (GGML block-quantized weights: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), per group of S
//         input features (S = the format's sub-block: 32, or 16 for Q6_K):
//           quants  S/4 steps x 4 quarters x 8 outputs x 4 consecutive k, int8   32*S bytes
//                   (a step's 128 bytes hold its 32 outputs' 4 codes each, so
//                   16 outputs are one 64-byte line: a 512-bit operand, an AMX tile row)
//                   or, for 4-bit codes (Q4_0, Q4_K), nibble panels:
//                   4 quarters x S/8 step pairs x 8 x 4: step 2t in the low
//                   nibble, step 2t + 1 in the high one                         16*S bytes
//           scales  32 outputs' sub-block scales, f16 as the file has them  64 bytes
//                   (f32 for IQ4_XS, whose scales are d times an integer: 128 bytes)
//           mins    32 outputs' sub-block mins, likewise (formats with mins only)
//         A weight is scale * q - min, exactly as the file's values dequantize
//         (engine/quant/ggml_blocks.h); quants stay integers, so a row's dot product
//         with 8-bit activations is an exact integer sum per group.
//       or, for the K-quants with integer sub-block scales (Q2_K, Q4_K, Q5_K, Q6_K:
//         quant::HasIntegerSubBlockScales), per super-block of 256 input features, its
//         n = 256 / S sub-blocks:
//           quants  each sub-block's, as above (Q6_K's codes unsigned, 0..63)   n x 32*S or 16*S
//                   or, for 5- and 6-bit codes (Q5_K, Q6_K), nibble panels with high
//                   bits: per quarter, its S/8 step pairs' low nibbles as above,
//                   then a 32-byte plane of the high bits, byte j holding those of
//                   byte j of each of the quarter's S/4 steps, step s's at bits
//                   b*s .. b*s + b - 1 (b = 1 or 2 high bits)                   n x (16*S + 128)
//           sc      per sub-block, the 32 outputs' integer scales, int8 (signed for
//                   Q6_K and Q3_K)                                               n x 32 bytes
//           m       per pair of sub-blocks (2i, 2i + 1), each output's two integer
//                   mins (m[2i], m[2i + 1]), uint8                               n x 32 bytes
//                   (none for Q6_K and Q3_K, whose m is 32 sc and 4 sc: the kernels
//                   form the pairs from the scales and shift the sum)
//           d, dmin the super-block's scales, f32 per output                    256 bytes
//         The kernels widen sc and m where they use them (vpmaddwd pairs on AVX2, int32
//         lanes on VNNI), once per sub-block and tile, not per row: stored widened they
//         took a fifth of a Q4_K panel's bytes, and a decode step streams every byte.
//         A weight is d * (sc * q) - dmin * m, and with activations quantized per 256
//         (one scale a super-block) a row's product is two exact integer sums per
//         super-block, sum_j sc_j * (q . x)_j and sum_j m_j * (sum x)_j, then two float
//         steps: 8 (Q4_K) or 16 (Q6_K) times fewer than one per sub-block.
//
// kBf16 is the operand layout of vdpbf16ps: a 16-lane register holds 16 outputs' weight
// pairs, multiplied with one broadcast pair of the activation. f16 weights are rounded
// to bf16 here (3 mantissa bits dropped; the range is kept); f32 weights keep f32.
// kQ8's quarters of 8 outputs x 4 k are the operand of vpmaddubsw / vpdpbusd (a 256-bit
// register holds 8 outputs' 4 consecutive quants, multiplied with 4 broadcast bytes of
// the activation). Quantized weights are held quantized: one byte a weight plus the
// group's scales (8.5 bits a weight for Q8_0, as in its file), half a byte for the 4-bit
// formats (4.75 bits a weight for Q4_K with its scales and mins, 4.5 for Q4_0, 5 for
// Q4_1), and half a byte plus one or two high bits for Q5_K and Q6_K (5.75 and 6.75 bits
// a weight; their files 5.5 and 6.56): batch-1 decoding streams every weight once a
// token, so its speed is the bytes a weight. A shift and two masks per 64 codes, and a
// shift, a mask and an or per 32 codes for the high bits, shared by the rows of a tile,
// restore the bytes; every kernel reads them.
// Output features are padded to whole panels and K to whole pairs with zeros, so the
// kernels have no edge cases inside a panel; the padded outputs are never stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/cpu/large_buffer.h"
#include "engine/tensor.h"

namespace crossreg::cpu {

class ThreadPool;

inline constexpr int kPanelWidth = 32;     // outputs per panel
inline constexpr int kPanelStepBytes = 128;  // bytes per k step (f32) or k-pair (bf16)

enum class PanelFormat { kF32, kBf16, kQ8 };

// How a kQ8 panel's groups read (from the weights' GGML format).
struct QuantGroupLayout {
  int sub_block = 32;          // input features per group (one scale and min per output)
  bool has_min = false;        // weight = scale * q - min (Q4_0, Q4_K, Q5_K), else scale * q
  bool signed_quants = false;  // q in [-128, 127] (Q8_0, Q6_K), else q in [0, 63]
  // Steps of 4 k whose vpmaddubsw int16 pair sums can be added in int16 before widening
  // without overflow: 2 * max|q| * 127 per step, at most 32767 in all.
  int int16_steps = 1;
  bool nibbles = false;  // two 4-bit codes a byte (the layout above)
  // Nibble panels of integer-scale groups only: each code's bits above its low nibble,
  // 1 (Q5_K) or 2 (Q6_K), in a plane after each quarter's nibbles; 0 for 4-bit codes.
  int high_bits = 0;
  // 256 for integer sub-block scales (a group is then a super-block of sub-blocks), else 0.
  int super_block = 0;
  // Integer-scale groups whose mins are 2^min_shift times their scales and dmin = d
  // (Q6_K: 5, Q3_K: 2): no m pairs stored; 0 where the mins are stored.
  int min_shift = 0;
  // Per-group formats whose scales (and mins) are the file's f16 values (Q8_0, Q4_0, Q4_1,
  // Q5_0, Q5_1, IQ4_NL) keep them as f16, exactly; IQ4_XS's, d times a 6-bit integer, need f32.
  bool f16_scales = false;
  int scale_bytes() const { return f16_scales ? 2 : 4; }
  int sub_blocks() const { return super_block > 0 ? super_block / sub_block : 1; }
  int group_inputs() const { return super_block > 0 ? super_block : sub_block; }
  // One quarter's codes of one sub-block (nibble panels): its step pairs, then the high plane.
  int64_t quarter_code_bytes() const { return 4 * sub_block + (high_bits > 0 ? 32 : 0); }
  int64_t code_bytes() const { return nibbles ? 4 * quarter_code_bytes() : 32 * sub_block; }  // one sub-block's quants
  // Integer-scale groups: where the scales, the mins and d (dmin 128 bytes after) start,
  // and the bytes of sub-block s's scale and min of output o.
  int64_t int_scales_offset() const { return sub_blocks() * code_bytes(); }
  int64_t int_mins_offset() const { return int_scales_offset() + sub_blocks() * kPanelWidth; }
  int64_t super_scales_offset() const { return int_mins_offset() + (min_shift > 0 ? 0 : sub_blocks() * kPanelWidth); }
  int64_t int_scale_at(int s, int o) const { return int_scales_offset() + s * kPanelWidth + o; }
  int64_t int_min_at(int s, int o) const { return int_mins_offset() + (s / 2) * 2 * kPanelWidth + 2 * o + s % 2; }
  // The same groups with a byte a code (nibbles and high bits unpacked): what calls of
  // several row tiles unpack nibble panels into (quant_panel_order.h RunStagedQuantPanels).
  QuantGroupLayout unpacked() const {
    QuantGroupLayout bytes = *this;
    bytes.nibbles = false;
    bytes.high_bits = 0;
    return bytes;
  }
  int64_t group_bytes() const {
    if (super_block > 0) return super_scales_offset() + 256;
    return code_bytes() + kPanelWidth * scale_bytes() * (has_min ? 2 : 1);
  }
};

// One mapping for many packed matrices: a model's matrices are mostly smaller than a
// 2 MiB huge page (the ~110M model's Q, K, V and O are 1.2 MB each), so packed one
// mapping each, half of its weights would sit on 4 KiB pages. Sized up front
// (PackedWeights::PackedBytes per matrix), filled front to back in the order a forward
// reads the matrices; it must outlive the weights packed into it.
class WeightArena {
 public:
  explicit WeightArena(size_t bytes) : buffer_(bytes) {}
  // The next `bytes` (zeros, 128-byte aligned), or null when they do not fit.
  unsigned char* Take(size_t bytes);
  size_t size() const { return buffer_.size(); }
  size_t used() const { return used_; }

 private:
  LargeBuffer buffer_;
  size_t used_ = 0;
};

class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(PackedWeights&& other) noexcept { *this = std::move(other); }
  PackedWeights& operator=(PackedWeights&& other) noexcept {
    format_ = other.format_;
    out_ = std::exchange(other.out_, 0);
    in_ = std::exchange(other.in_, 0);
    k_steps_ = std::exchange(other.k_steps_, 0);
    quant_ = other.quant_;
    data_ = std::exchange(other.data_, nullptr);
    owned_ = std::move(other.owned_);
    return *this;
  }
  // w is (out, in) of any stored dtype (quantized ones into kQ8, whose `in` is a whole
  // number of blocks). `pool` (optional) packs in parallel. With an `arena`, the panels
  // go into it (into a buffer of their own if it is full).
  static PackedWeights Pack(const TensorRef& w, ThreadPool* pool = nullptr, WeightArena* arena = nullptr);
  // The bytes Pack takes for w: what to size a WeightArena by.
  static size_t PackedBytes(const TensorRef& w);
  // An f32 matrix (out, in), row-major (LoRA A and B).
  static PackedWeights PackF32(const float* w, int64_t out, int64_t in);

  bool empty() const { return data_ == nullptr; }
  PanelFormat format() const { return format_; }
  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  // K steps per panel: `in` (kF32), the k-pairs ceil(in / 2) (kBf16), or the groups
  // in / group_inputs() (kQ8).
  int64_t k_steps() const { return k_steps_; }
  int64_t panels() const { return (out_ + kPanelWidth - 1) / kPanelWidth; }
  int64_t panel_bytes() const {
    return format_ == PanelFormat::kQ8 ? k_steps_ * quant_.group_bytes() : k_steps_ * kPanelStepBytes;
  }
  // kQ8 only: the groups' layout.
  const QuantGroupLayout& quant() const { return quant_; }
  const unsigned char* panel(int64_t j) const { return data_ + j * panel_bytes(); }
  int64_t bytes() const { return panels() * panel_bytes(); }

 private:
  void SetShape(DType source, int64_t out, int64_t in);
  size_t StorageBytes() const;  // bytes(), at least 64
  void Allocate(DType source, int64_t out, int64_t in, WeightArena* arena);
  void PackQuantizedPanels(const TensorRef& w, int64_t begin, int64_t end);
  void PackSuperBlockPanels(const TensorRef& w, int64_t begin, int64_t end);
  unsigned char* mutable_panel(int64_t j) { return data_ + j * panel_bytes(); }

  PanelFormat format_ = PanelFormat::kF32;
  int64_t out_ = 0;
  int64_t in_ = 0;
  int64_t k_steps_ = 0;
  QuantGroupLayout quant_;
  unsigned char* data_ = nullptr;  // in an arena, or in owned_
  LargeBuffer owned_;               // huge pages where it is large enough (large_buffer.h)
};

}  // namespace crossreg::cpu
