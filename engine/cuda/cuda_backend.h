// The CUDA backend: bf16 (or FP8) weights and GEMMs over all rows of a step at once (a
// GEMV kernel for the few rows of a decode step, cuBLAS above; f32 accumulate), f32
// activations and f32 or bf16 paged K/V storage on the device, the predictive rows' LoRA
// delta in f32 by two small kernels per group of targets.
// Same contract as the CPU backend (engine/backend.h, engine/forward_batch.h).
// No CUDA types here: callers need only this header and the crossreg_cuda library.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

// The decoder layers' linear weights on the device: bf16 (f32/f16/quantized GGUF sources
// converted at upload), or FP8 e4m3 with a scale per output row, quantized on the device
// from bf16 at load (half the bytes a decode step streams; the embedding and the LM head
// stay bf16).
enum class CudaWeights { kBf16, kFp8 };

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
  CudaWeights weights = CudaWeights::kBf16;
  // How the predictive rows' attention splits its positions: 0 picks, per forward,
  // enough splits for about two blocks per SM (their tiles group by sequence, apart from
  // the control rows'); N > 0 fixes N; -1 splits them 32 ways by the per-row rule, as
  // control rows are (one launch; the comparison baseline). Control rows' bits are the
  // same in every setting.
  int predictive_attention_splits = 0;
  // Predictive rows split apart run on the tensor-core kernel (bf16 products) where
  // head_dim is 64 or 128; false keeps them on the SIMT kernel.
  bool predictive_attention_mma = true;
  // Row summaries (greedy rows' argmax and logit gap) reduced on the device, so only 12
  // bytes a row cross to the host. Off by default: on an H100 greedy decoding with device
  // summaries returned NaN summaries from the second or third forward on (tests/gpu:
  // OneRowForwardsReplayLikeEagerOnes, SummaryRowsAreTheReductionOfTheRowsTheyReplace,
  // the exactness tests), while the same forwards copying whole rows were exact; not yet
  // understood (docs/limitations.md; docs/cuda.md, "Known gaps"). Off, every logit row is
  // copied and summarised on the host (SplitLogitRows), as the CPU backend does.
  bool device_summaries = false;
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
