// The CPU backend: float32 compute over stored f32/f16/bf16 weights, K/V in f32
// paged storage, all rows of a step through each weight matrix at once.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"

namespace crossreg {

struct CpuBackendOptions {
  int num_threads = 0;  // 0: one per usable core (engine/cpu/thread_pool.h)
  KvCacheConfig kv;     // must match the PagedKvCache used with this backend
  // Predictive rows add this adapter's low-rank delta; null: they use the base weights.
  const LoraAdapter* adapter = nullptr;
};

// `model` (and the adapter) must outlive the backend.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const Model& model,
                                                          const CpuBackendOptions& options);

}  // namespace crossreg
