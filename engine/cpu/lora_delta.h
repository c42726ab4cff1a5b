// The predictive stream's low-rank update on the CPU: y[r] += scale · B·(A·x[r]) for
// the predictive rows, on top of the shared base layer that produced y for every row.
//
// At one or two predictive rows the update is all weight streaming (a rank-32 adapter
// on the default model is ~10% of the base weights' bytes), so it is built to stream
// them like the base layers: A and B in the base layer's panel format (bf16 for a bf16
// model), the A products of a group of layers (Q/K/V, gate/up) in the base layer's
// parallel region, and the group's B products in one more.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/lora_adapter.h"

namespace crossreg::cpu {

struct PackedLoraMatrix {
  PackedWeights a;  // (rank, in)
  PackedWeights b;  // (out, rank)
  float scale = 0.0f;
  bool present() const { return !a.empty(); }
  static PackedLoraMatrix Pack(const LoraMatrix& m, int64_t in, int64_t out, PanelFormat format);
};

// Up to this many layers share one input (Q, K, V).
inline constexpr int kMaxLoraGroup = 3;

// Linear layers reading the same x, with the adapter's update on the predictive rows:
// y_i = x · W_iᵀ for every row of x (rows, in), then y_i[r] += scale_i · B_i·(A_i·x[r])
// for r in `which` (indices into x's rows). lora[i] null or not present: output i has
// no update. count <= kMaxLoraGroup. A row's result never depends on the other rows.
void LinearWithLora(const LinearOutput* base, const PackedLoraMatrix* const* lora, int count, const float* x,
                    int64_t rows, const std::vector<int64_t>& which, ThreadPool& pool, SimdLevel level);

}  // namespace crossreg::cpu
