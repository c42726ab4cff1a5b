// A linear layer's weight packed once, at backend creation, into the layout the CPU
// micro-kernels read: panels of 32 output features, each panel one contiguous stream.
//
//   kF32  (f32 weights):        per k,                     the panel's 32 outputs       128 bytes
//   kBf16 (bf16, f16 weights):  per k-pair (2p, 2p+1),     32 outputs x (w[2p], w[2p+1]) 128 bytes
//
// kBf16 is the operand layout of vdpbf16ps: a 16-lane register holds 16 outputs' weight
// pairs, multiplied with one broadcast pair of the activation. f16 weights are rounded
// to bf16 here (3 mantissa bits dropped; the range is kept); f32 weights keep f32.
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

enum class PanelFormat { kF32, kBf16 };

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
    data_ = std::exchange(other.data_, nullptr);
    owned_ = std::move(other.owned_);
    return *this;
  }
  // w is (out, in) of any stored dtype. `pool` (optional) packs in parallel. With an
  // `arena`, the panels go into it (into a buffer of their own if it is full).
  static PackedWeights Pack(const TensorRef& w, ThreadPool* pool = nullptr, WeightArena* arena = nullptr);
  // The bytes Pack takes for w: what to size a WeightArena by.
  static size_t PackedBytes(const TensorRef& w);
  // An f32 matrix (out, in), row-major (LoRA A and B).
  static PackedWeights PackF32(const float* w, int64_t out, int64_t in);

  bool empty() const { return data_ == nullptr; }
  PanelFormat format() const { return format_; }
  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  // K steps per panel: `in` (kF32) or the k-pairs ceil(in / 2) (kBf16).
  int64_t k_steps() const { return k_steps_; }
  int64_t panels() const { return (out_ + kPanelWidth - 1) / kPanelWidth; }
  int64_t panel_bytes() const { return k_steps_ * kPanelStepBytes; }
  const unsigned char* panel(int64_t j) const { return data_ + j * panel_bytes(); }
  int64_t bytes() const { return panels() * panel_bytes(); }

 private:
  void SetShape(PanelFormat format, int64_t out, int64_t in);
  size_t StorageBytes() const;  // bytes(), at least 64
  void Allocate(PanelFormat format, int64_t out, int64_t in, WeightArena* arena);
  unsigned char* mutable_panel(int64_t j) { return data_ + j * panel_bytes(); }

  PanelFormat format_ = PanelFormat::kF32;
  int64_t out_ = 0;
  int64_t in_ = 0;
  int64_t k_steps_ = 0;
  unsigned char* data_ = nullptr;  // in an arena, or in owned_
  LargeBuffer owned_;               // huge pages where it is large enough (large_buffer.h)
};

}  // namespace crossreg::cpu
