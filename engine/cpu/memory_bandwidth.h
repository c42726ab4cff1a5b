// Measures this machine's sustained DRAM read bandwidth, the roofline of a
// memory-bound decode forward.
#pragma once

#include <cstdint>

#include "engine/cpu/thread_pool.h"

namespace crossreg::cpu {

// Best of `repeats` passes reading a `bytes` buffer (far larger than the caches) with
// every thread of `pool`. Bytes per second.
double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int repeats = 5);

}  // namespace crossreg::cpu
