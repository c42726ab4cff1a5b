// One way to open an engine: model (+ adapter) loaded, a backend chosen and created,
// its paged KV cache sized, the forward cost curve measured. crossreg-server,
// crossreg-generate and the CPU benchmarks all start here, so the start-up sequence
// and its errors are written once.
//
// This library (crossreg_runtime) sits above the backends: it links the CUDA backend
// when the build has one (-DCROSSREG_CUDA=ON) and the engine core stays free of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/decoding/acceptance_memory.h"
#include "engine/decoding/forward_cost_curve.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/ngram_table.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

enum class BackendChoice {
  kCpu,
  kCuda,
  kAuto,  // CUDA when this build has it and a device is visible, else CPU
};
const char* BackendChoiceName(BackendChoice choice);  // "cpu", "cuda", "auto"
absl::StatusOr<BackendChoice> ParseBackendChoice(std::string_view name);

// The device's format for the decoder layers' linear weights (--weights).
enum class DeviceWeights {
  kBf16,  // the CUDA backend's bf16 (the CPU backend computes on the weights as loaded)
  kFp8,   // e4m3 with a scale per output row, quantized at load: the CUDA backend only
};
const char* DeviceWeightsName(DeviceWeights weights);  // "bf16", "fp8"
absl::StatusOr<DeviceWeights> ParseDeviceWeights(std::string_view name);

struct EngineOptions {
  std::string model_path;    // .gguf file or HF directory; empty: the embedded default model
  std::string adapter_path;  // PEFT directory; empty: the model directory's own adapter/ if any, else none
  // Corpus n-gram table for n-gram drafts (engine/decoding/ngram_table.h); empty: the
  // model directory's own ngram_table.bin if any; "none": no table.
  std::string ngram_table_path;
  BackendChoice backend = BackendChoice::kAuto;
  int cpu_threads = 0;       // CPU backend; 0: one per usable core (cgroup-aware)
  int cuda_device = 0;       // CUDA backend: device ordinal
  // KV cache: exactly `kv_blocks` blocks when > 0, else as many as `kv_memory_bytes` holds,
  // of `kv_dtype` elements; unset ("auto"): AutoKvDtype's choice for the model and backend.
  std::optional<KvDtype> kv_dtype;
  int kv_block_size = 16;
  int64_t kv_blocks = 0;
  int64_t kv_memory_bytes = int64_t{512} << 20;
  // Automatic prefix caching: full K/V blocks stay cached for later requests with the
  // same prefix (engine/kv/paged_kv_cache.h). The server turns it on (--prefix_caching);
  // off here, so benchmarks that run one prompt again and again time its prefill each time.
  bool prefix_caching = false;
  // A quantized type: the model's float matrices are quantized at load
  // (engine/model/model_quantizer.h); kF32: the model as stored.
  DType quantize = DType::kF32;
  DeviceWeights device_weights = DeviceWeights::kBf16;
  // > 0: measure the forward cost curve (adaptive draft length) up to this many rows,
  // on a scratch sequence of up to 64 cached positions, before returning.
  int cost_curve_rows = 0;
  // > 0: run those forwards up to this many rows all the same, and keep no curve unless
  // cost_curve_rows asks for one. A program that times its decoding warms the backend so:
  // the first forwards of a fresh process touch new pages and scratch buffers, and an
  // adaptive run, which measures its curve first, would otherwise be timed warm against a
  // cold AR run (crossreg-generate: 11-30% on AR's 4 x 128 tokens of the default model).
  int warm_up_rows = 0;
};

// The predictive stream's drafter: the adapter when there is one, else a model that
// drafts for itself (ModelConfig::self_drafting), else none.
bool HasDrafter(const Model& model, const LoraAdapter* adapter);
int32_t DrafterPlaceholder(const Model& model, const LoraAdapter* adapter);  // 0 without a drafter
// The layout it was trained for, "chain" or "blocks"; "" without a drafter.
std::string DrafterLayout(const Model& model, const LoraAdapter* adapter);

// --kv_dtype auto: bf16 on the CPU backend unless the model's linear weights are f32
// (bf16, f16 and quantized models compute K/V from weights coarser than bf16, as the
// peer engines cache them in 16 bits; the cache takes half the memory and a batch's
// attention reads half the bytes, so batched decode steps are faster: docs/benchmarks.md,
// "The K/V cache's element type"), f32 for f32 models (stories260K: its golden outputs
// are f32 runs).
// The CUDA backend keeps f32: its bf16 cache measured no faster (docs/cuda.md).
// Lossless decoding equals AR at either type.
KvDtype AutoKvDtype(const Model& model, BackendChoice backend);

// An open engine. Members are destroyed bottom-up: the backend (which reads the
// model's weights) before the model.
struct Engine {
  std::string model_path;    // resolved (the default model's path when none was given)
  std::string adapter_path;  // resolved; empty: no adapter
  std::unique_ptr<Model> model;
  std::unique_ptr<LoraAdapter> adapter;  // null: lossless/lossy refused unless the model drafts itself
  std::string ngram_table_path;           // resolved; empty: none
  std::unique_ptr<NgramTable> ngram_table;  // null: n-gram drafts from the context alone
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PagedKvCache> kv;
  KvDtype kv_dtype = KvDtype::kF32;  // the cache's element type (resolved from EngineOptions)
  std::optional<ForwardCostCurve> cost_curve;
  // Acceptance shared by the requests decoded on this engine (adaptive draft length).
  std::unique_ptr<AcceptanceMemory> acceptance_memory = std::make_unique<AcceptanceMemory>();
  double load_seconds = 0;  // model + adapter loading
  std::string quantize_summary;  // what --quantize did; empty when it was not asked for

  // What requests on this engine may do (ValidateGenerationRequest).
  DecodingEnvironment Environment(int max_gamma = kMaxGamma) const;
  // "cpu (AMD EPYC 9B45, 2 threads, SIMD avx512)".
  std::string BackendDescription() const;
  // "1 rows 0.52 ms, 2 rows 0.61 ms, ...; control rows only (n-gram): 1 rows ...", or ""
  // when no curve was measured.
  std::string CostCurveDescription() const;
};

// The model and adapter an engine will run, loaded but without a backend yet: a
// caller that sizes the cache from the model (crossreg-generate tokenizes its prompt
// first) opens the engine in two steps.
struct LoadedModel {
  std::string model_path;    // resolved (the default model's path when none was given)
  std::string adapter_path;  // resolved; empty: no adapter
  std::unique_ptr<Model> model;
  std::unique_ptr<LoraAdapter> adapter;
  std::string ngram_table_path;  // resolved; empty: none
  std::unique_ptr<NgramTable> ngram_table;
  double load_seconds = 0;
  std::string quantize_summary;
};

// Loads options.model_path (the embedded default model when empty) and
// options.adapter_path (when empty: the model directory's bundled adapter/, if any). Errors name the path: "cannot load model
// PATH: ...", "cannot load adapter DIR: ...".
absl::StatusOr<LoadedModel> LoadEngineModel(const EngineOptions& options);

// Opens an engine on a loaded model (or one made in memory, e.g. random weights for
// benchmarks): creates the backend, sizes the KV cache, measures the cost curve.
// "--backend cuda: no CUDA device is available ..." when CUDA was asked for and
// cannot run.
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(LoadedModel loaded, const EngineOptions& options);

// LoadEngineModel, then OpenEngine.
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const EngineOptions& options);

// Whether this build includes the CUDA backend, and whether it sees a device.
bool CudaBackendBuilt();
bool CudaDeviceVisible();

}  // namespace crossreg
