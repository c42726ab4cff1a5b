// Measures this machine's peak arithmetic rates, the roofline of a compute-bound
// forward (prefill, many verify rows): f32 FMA (vfmadd, 2 FLOP per lane), bf16 dot
// product (vdpbf16ps, 2 FLOP per bf16 pair) and 8-bit integer dot product (vpmaddubsw +
// vpmaddwd, or vpdpbusd with VNNI; 2 ops per multiply-add; and the signed codes' step
// where it costs more), each on the widest ISA this CPU has. Each thread of the pool
// runs independent accumulator chains long enough to hide instruction latency.
#pragma once

#include <string>

#include "engine/cpu/thread_pool.h"
#include "engine/dtype.h"

namespace crossreg::cpu {

struct ComputePeaks {
  double f32_fma_flops = 0;   // FLOP/s over all threads (AVX-512, AVX2 or portable)
  double bf16_dot_flops = 0;  // FLOP/s over all threads; 0 without AVX512_BF16
  double int8_dot_ops = 0;    // ops/s over all threads (AVX-512 VNNI, AVX-512 BW, AVX2 or portable)
  // Signed x signed bytes: the step of the formats whose codes are signed on the kernels
  // (Q8_0, IQ4_NL, IQ4_XS). AVX2 has no such multiply, so where the AVX2 kernel runs them
  // (AVX2 hosts, AVX-512 without VNNI) each product also takes a vpsignb, measured here;
  // elsewhere the int8 rate (VNNI's offset codes add no operation per product).
  double int8_signed_dot_ops = 0;
  double amx_bf16_flops = 0;  // AMX tdpbf16ps, FLOP/s over all threads; 0 where !HasAmx()
  double amx_int8_ops = 0;    // AMX tdpbusd, ops/s over all threads; 0 where !HasAmx()
  std::string f32_isa, int8_isa, int8_signed_isa;  // which instructions each rate was measured with

  // The rate that bounds a linear layer over weights of `weights` on this CPU, and the
  // name the benchmarks print for it: for bf16/f16 weights the AMX tile rate where they
  // run on AMX, bf16 dot products where the CPU runs them with vdpbf16ps
  // (engine/cpu/bf16_panel_kernel.h; the other paths widen them to f32 and FMA); the
  // int8 rate for quantized weights; else f32 FMA.
  struct Peak {
    double rate;
    const char* name;  // "AMX bf16", "bf16 dot-product", "int8 dot-product" or "f32 FMA"
  };
  Peak PeakFor(DType weights) const;
};

// Best of `repeats` timed runs per rate.
ComputePeaks MeasureComputePeaks(ThreadPool& pool, int repeats = 5);

namespace internal {
// Where the loops leave their result, so the compiler cannot drop them.
inline volatile float& PeakSink() {
  static volatile float sink = 0;
  return sink;
}
// Operations done: `iterations` x the chains x the instruction's operations. Call only
// with the ISA.
double FmaLoopAvx512(int64_t iterations);
double FmaLoopAvx2(int64_t iterations);
double FmaLoopPortable(int64_t iterations);
double DotBf16LoopAvx512Bf16(int64_t iterations);
double DotInt8LoopAvx512Vnni(int64_t iterations);
double DotInt8LoopAvx512(int64_t iterations);
double DotInt8LoopAvx2(int64_t iterations);
double DotInt8SignedLoopAvx2(int64_t iterations);
double DotInt8LoopPortable(int64_t iterations);
double DotBf16LoopAmx(int64_t iterations);
double DotInt8LoopAmx(int64_t iterations);
}  // namespace internal

}  // namespace crossreg::cpu
