// The CUDA backend: bf16 weights and GEMMs over all rows of a step at once (a GEMV
// kernel up to 4 rows, cuBLAS above; f32 accumulate), f32 activations and f32 or bf16
// paged K/V storage on the device, the predictive rows' LoRA delta in f32 by two small
// kernels per group of targets.
// Same contract as the CPU backend (engine/backend.h, engine/forward_batch.h).
// No CUDA types here: callers need only this header and the crossreg_cuda library.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/kv_storage.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/paged_kv_cache.h"

namespace crossreg {

struct CudaBackendOptions {
  int device = 0;    // CUDA device ordinal
  KvCacheConfig kv;  // must match the PagedKvCache used with this backend
  // Predictive rows add this adapter's low-rank delta; null: they use the base weights.
  const LoraAdapter* adapter = nullptr;
  // Decode and verify forwards (up to 512 rows) replay a CUDA graph per batch shape,
  // captured the second time the shape is seen: one launch instead of ~400.
  bool use_graphs = true;
  // The paged cache's element type: f32, or bf16 (half the bytes; rounded as the CPU's
  // --kv_dtype bf16). Predictive rows' K/V stay f32 for the one forward they live.
  KvDtype kv_dtype = KvDtype::kF32;
};

// True when the CUDA runtime sees at least one device.
bool CudaDeviceAvailable();

// Uploads `model` (and the adapter) to the device; both may be freed afterwards.
// FailedPrecondition when no CUDA device is present.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const Model& model, const CudaBackendOptions& options);

// A backend over random weights made on the device (benchmarks at real shapes
// without a 16 GB host copy). The adapter, if any, is uploaded from the host.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackendWithRandomWeights(const ModelConfig& config,
                                                                            const CudaBackendOptions& options,
                                                                            uint64_t seed);

}  // namespace crossreg
