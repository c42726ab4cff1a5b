// The CPU backend: weights packed once into the kernels' panel layout (bf16 panels for
// bf16/f16 weights, multiplied with bf16-rounded activations; f32 panels for f32),
// f32 activations, K/V in paged storage, all rows of a step through each weight matrix
// at once.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_features.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"

namespace crossreg {

struct CpuBackendOptions {
  int num_threads = 0;  // 0: one per usable core (engine/cpu/thread_pool.h)
  KvCacheConfig kv;     // must match the PagedKvCache used with this backend
  // Predictive rows add this adapter's low-rank delta; null: they use the base weights.
  const LoraAdapter* adapter = nullptr;
  // Kernel path; lowered to what the CPU has (tests run every path). Default: the best.
  cpu::SimdLevel simd = cpu::SimdLevel::kAvx512Bf16;
  KvDtype kv_dtype = KvDtype::kF32;  // element type of the K/V storage
  // Models whose weights (bytes read per forward) are at most this split a forward of
  // 8 or more rows per thread between the threads, each running every layer on its
  // share of the rows (the threads meet around each layer's K/V store), instead of
  // splitting every op: their ops are too short to pay for a parallel region each, and
  // each core reading all of so few weights costs little. Larger models split only
  // forwards of 24 to 64 rows per thread (engine/cpu/cpu_backend.cc, SplitRows).
  // Results are the same either way (bitwise). 0: never split.
  int64_t row_split_max_weight_bytes = int64_t{64} << 20;
};

// `model` (and the adapter) must outlive the backend.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const Model& model,
                                                          const CpuBackendOptions& options);

}  // namespace crossreg
