// The predictive stream's low-rank update on the CPU: y[r] += scale · B·(A·x[r]) for
// the chosen rows, after the shared base GEMM has produced y for every row. Both
// products go through the parallel SIMD linear kernel on the gathered rows.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "engine/model/lora_adapter.h"

namespace crossreg::cpu {

// x: (rows, in), y: (rows, out); only rows listed in `which` are updated.
void AddLoraDelta(const LoraMatrix& m, int64_t in, int64_t out, const float* x, float* y,
                  const std::vector<int64_t>& which, ThreadPool& pool);

}  // namespace crossreg::cpu
