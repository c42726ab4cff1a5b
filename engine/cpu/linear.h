// y = x · Wᵀ for a batch of rows over packed weights (engine/cpu/packed_weights.h): the
// one kernel that streams the weights. bf16 (and f16) weights multiply activations
// rounded to bf16 once per call, with vdpbf16ps or widened to f32 and FMAs, whichever
// this CPU runs faster (engine/cpu/bf16_panel_kernel.h); f32 weights keep f32. Paths: AVX512_BF16, AVX-512 F, AVX2 + FMA, portable; the level is
// an argument so tests run every path. Each output element is accumulated in the same
// order whatever the number of rows, so a row's result does not depend on which rows
// ran with it (engine/cpu/linear_kernels.h).
#pragma once

#include <cstdint>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/thread_pool.h"
#include "engine/tensor.h"

namespace crossreg::cpu {

// x: (rows, in) f32, row stride `in`. y: (rows, out) f32, row stride `out`.
void Linear(const PackedWeights& w, const float* x, int64_t rows, float* y, ThreadPool& pool,
            SimdLevel level = DetectedSimdLevel());

// Several linear layers reading the same x (Q/K/V, gate/up) in one parallel region:
// x is rounded to bf16 once and one synchronisation covers all of them.
struct LinearOutput {
  const PackedWeights* w;
  float* y;
};
void LinearShared(const LinearOutput* outputs, int count, const float* x, int64_t rows, ThreadPool& pool,
                  SimdLevel level = DetectedSimdLevel());

// Several small linear layers, each with its own input but the same row count, in one
// parallel region (the adapter's B products of a group of layers). x: (rows, w->in()),
// y: (rows, w->out()).
struct LinearJob {
  const PackedWeights* w;
  const float* x;
  float* y;
};
void LinearEach(const LinearJob* jobs, int count, int64_t rows, ThreadPool& pool,
                SimdLevel level = DetectedSimdLevel());

// Plain double-precision loops over the unpacked weight (activations not rounded):
// the reference the kernels are tested against.
void LinearReference(const TensorRef& w, const float* x, int64_t rows, float* y);

// The instruction quantized (kQ8) weights run on at `level`, for benchmarks and logs:
// "vpdpbusd (AVX-512 VNNI)", "vpmaddubsw (AVX2)" or "portable".
const char* QuantKernelName(SimdLevel level);

}  // namespace crossreg::cpu
