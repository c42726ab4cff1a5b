// The predictive stream's low-rank update on the CPU: y[r] += scale · B·(A·x[r]) for
// the chosen rows, after the shared base GEMM has produced y for every row. Both
// products go through the parallel SIMD linear kernel on the gathered rows, over A and
// B packed once (f32 panels).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/lora_adapter.h"

namespace crossreg::cpu {

struct PackedLoraMatrix {
  PackedWeights a;  // (rank, in)
  PackedWeights b;  // (out, rank)
  float scale = 0.0f;
  bool present() const { return !a.empty(); }
  static PackedLoraMatrix Pack(const LoraMatrix& m, int64_t in, int64_t out);
};

// x: (rows, in), y: (rows, out); only rows listed in `which` are updated.
void AddLoraDelta(const PackedLoraMatrix& m, const float* x, float* y, const std::vector<int64_t>& which,
                  ThreadPool& pool, SimdLevel level);

}  // namespace crossreg::cpu
