// Measures this machine's sustained DRAM read bandwidth, the roofline of a
// memory-bound decode forward.
#pragma once

#include <cstdint>

#include "engine/cpu/thread_pool.h"

namespace crossreg::cpu {

// Best of `repeats` passes reading a `bytes` buffer with every thread of `pool`, after
// one warm-up pass. Bytes per second. A buffer far larger than the caches gives DRAM
// bandwidth; a buffer the size of a model's weights gives the bandwidth a decode
// forward can actually reach (on CPUs whose last-level cache holds much of it).
double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int repeats = 5);

}  // namespace crossreg::cpu
