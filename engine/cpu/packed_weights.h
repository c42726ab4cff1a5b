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

#include <cstdint>
#include <memory>

#include "engine/tensor.h"

namespace crossreg::cpu {

class ThreadPool;

inline constexpr int kPanelWidth = 32;     // outputs per panel
inline constexpr int kPanelStepBytes = 128;  // bytes per k step (f32) or k-pair (bf16)

enum class PanelFormat { kF32, kBf16 };

class PackedWeights {
 public:
  PackedWeights() = default;
  // w is (out, in) of any stored dtype. `pool` (optional) packs in parallel.
  static PackedWeights Pack(const TensorRef& w, ThreadPool* pool = nullptr);
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
  const unsigned char* panel(int64_t j) const { return data_.get() + j * panel_bytes(); }
  int64_t bytes() const { return panels() * panel_bytes(); }

 private:
  struct Free {
    void operator()(unsigned char* p) const;
  };
  void Allocate(PanelFormat format, int64_t out, int64_t in);
  unsigned char* mutable_panel(int64_t j) { return data_.get() + j * panel_bytes(); }

  PanelFormat format_ = PanelFormat::kF32;
  int64_t out_ = 0;
  int64_t in_ = 0;
  int64_t k_steps_ = 0;
  std::unique_ptr<unsigned char[], Free> data_;  // 64-byte aligned
};

}  // namespace crossreg::cpu
