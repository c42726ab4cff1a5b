// Measures this machine's peak arithmetic rates, the roofline of a compute-bound
// forward (prefill, many verify rows): f32 FMA (vfmadd, 2 FLOP per lane) and bf16 dot
// product (vdpbf16ps, 2 FLOP per bf16 pair). Each thread of the pool runs independent
// accumulator chains long enough to hide instruction latency.
#pragma once

#include "engine/cpu/thread_pool.h"

namespace crossreg::cpu {

struct ComputePeaks {
  double f32_fma_flops = 0;   // FLOP/s over all threads; 0 without AVX-512
  double bf16_dot_flops = 0;  // FLOP/s over all threads; 0 without AVX512_BF16
};

// Best of `repeats` timed runs per rate.
ComputePeaks MeasureComputePeaks(ThreadPool& pool, int repeats = 5);

namespace internal {
// Where the loops leave their result, so the compiler cannot drop them.
inline volatile float& PeakSink() {
  static volatile float sink = 0;
  return sink;
}
// FLOPs done: `iterations` x 24 chains x the instruction's FLOPs. Call only with the ISA.
double FmaLoopAvx512(int64_t iterations);
double DotBf16LoopAvx512Bf16(int64_t iterations);
}  // namespace internal

}  // namespace crossreg::cpu
