#include "engine/runtime/open_engine.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/usable_cores.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/default_model.h"
#include "engine/model/model_quantizer.h"
#ifdef CROSSREG_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace crossreg {
namespace {

absl::Status WithPrefix(absl::string_view prefix, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const Model& model, const LoraAdapter* adapter,
                                                       const EngineOptions& options, const KvCacheConfig& kv) {
  // `options` as OpenEngine resolved them: a backend other than kAuto, a K/V element type.
  const BackendChoice choice = options.backend;
  const KvDtype kv_dtype = *options.kv_dtype;
  switch (choice) {
    case BackendChoice::kCpu: {
      if (options.device_weights == DeviceWeights::kFp8) {
        return absl::InvalidArgumentError(
            "--weights fp8: the CPU backend has no FP8 kernels (use --backend cuda, or --quantize q8_0 for 8-bit "
            "weights on the CPU)");
      }
      CpuBackendOptions cpu;
      cpu.num_threads = options.cpu_threads;
      cpu.kv = kv;
      cpu.adapter = adapter;
      cpu.kv_dtype = kv_dtype;
      return CreateCpuBackend(model, cpu);
    }
    case BackendChoice::kCuda: {
#ifdef CROSSREG_HAVE_CUDA
      CudaBackendOptions cuda;
      cuda.kv_dtype = kv_dtype;
      cuda.device = options.cuda_device;
      cuda.kv = kv;
      cuda.adapter = adapter;
      cuda.weights = options.device_weights == DeviceWeights::kFp8 ? CudaWeights::kFp8 : CudaWeights::kBf16;
      auto backend = CreateCudaBackend(model, cuda);
      if (!backend.ok()) return WithPrefix("--backend cuda: ", backend.status());
      return backend;
#else
      return absl::FailedPreconditionError(
          "--backend cuda: no CUDA device is available: this build has no CUDA backend (configure with "
          "-DCROSSREG_CUDA=ON)");
#endif
    }
    case BackendChoice::kAuto:
      break;
  }
  return absl::InternalError("backend choice not resolved");
}

// `options` as OpenEngine resolved them (a K/V element type).
absl::StatusOr<KvCacheConfig> KvConfig(const ModelConfig& config, const EngineOptions& options) {
  const KvDtype kv_dtype = *options.kv_dtype;
  if (options.kv_block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_block_size must be >= 1, got ", options.kv_block_size));
  }
  int64_t blocks = options.kv_blocks;
  if (blocks <= 0) {
    blocks = KvBlocksForBytes(config, options.kv_block_size, options.kv_memory_bytes, kv_dtype);
    if (blocks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv_memory_mb: ", options.kv_memory_bytes >> 20,
                       " MiB holds no KV block of this model (one block takes ",
                       KvBytesPerToken(config, kv_dtype) * options.kv_block_size, " bytes)"));
    }
  }
  if (blocks > (int64_t{1} << 30)) return absl::InvalidArgumentError(absl::StrCat("KV cache: ", blocks, " blocks is too many"));
  return KvCacheConfig{.block_size = options.kv_block_size,
                       .num_blocks = static_cast<int>(blocks),
                       .prefix_caching = options.prefix_caching};
}

}  // namespace

const char* BackendChoiceName(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::kCpu: return "cpu";
    case BackendChoice::kCuda: return "cuda";
    case BackendChoice::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<BackendChoice> ParseBackendChoice(std::string_view name) {
  if (name == "cpu") return BackendChoice::kCpu;
  if (name == "cuda") return BackendChoice::kCuda;
  if (name == "auto") return BackendChoice::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu, cuda or auto, got '", std::string(name), "'"));
}

const char* DeviceWeightsName(DeviceWeights weights) { return weights == DeviceWeights::kFp8 ? "fp8" : "bf16"; }

absl::StatusOr<DeviceWeights> ParseDeviceWeights(std::string_view name) {
  if (name == "bf16") return DeviceWeights::kBf16;
  if (name == "fp8") return DeviceWeights::kFp8;
  return absl::InvalidArgumentError(absl::StrCat("--weights must be bf16 or fp8, got '", std::string(name), "'"));
}

bool CudaBackendBuilt() {
#ifdef CROSSREG_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool CudaDeviceVisible() {
#ifdef CROSSREG_HAVE_CUDA
  return CudaDeviceAvailable();
#else
  return false;
#endif
}

KvDtype AutoKvDtype(const Model& model, BackendChoice backend) {
  if (backend != BackendChoice::kCpu) return KvDtype::kF32;
  const auto& layers = model.weights.layers;
  const bool f32_weights = !layers.empty() && layers.front().wq.dtype == DType::kF32;
  return f32_weights ? KvDtype::kF32 : KvDtype::kBf16;
}

bool HasDrafter(const Model& model, const LoraAdapter* adapter) {
  return adapter != nullptr || model.config.self_drafting();
}

int32_t DrafterPlaceholder(const Model& model, const LoraAdapter* adapter) {
  if (adapter != nullptr) return adapter->placeholder_token_id;
  return model.config.self_drafting() ? model.config.draft_placeholder : 0;
}

std::string DrafterLayout(const Model& model, const LoraAdapter* adapter) {
  if (adapter != nullptr) return adapter->draft_layout;
  return model.config.self_drafting() ? model.config.draft_layout : "";
}

DecodingEnvironment Engine::Environment(int max_gamma) const {
  DecodingEnvironment env;
  env.model = &model->config;
  env.has_adapter = HasDrafter(*model, adapter.get());
  env.placeholder_token = DrafterPlaceholder(*model, adapter.get());
  env.max_gamma = max_gamma;
  env.cost_curve = cost_curve.has_value() ? &*cost_curve : nullptr;
  env.ngram_table = ngram_table.get();
  env.acceptance_memory = acceptance_memory.get();
  return env;
}

std::string Engine::BackendDescription() const {
  return absl::StrCat(std::string(backend->name()), " (", backend->device(), ")");
}

std::string Engine::CostCurveDescription() const {
  std::string out;
  if (!cost_curve.has_value()) return out;
  auto list = [](const ForwardCostCurve::Points& points) {
    std::string s;
    for (const auto& [rows, seconds] : points) {
      absl::StrAppend(&s, s.empty() ? "" : ", ", rows, " rows ", absl::StrFormat("%.3f", seconds * 1e3), " ms");
    }
    return s;
  };
  out = list(cost_curve->points());
  if (!cost_curve->control_points().empty()) {
    absl::StrAppend(&out, "; control rows only (n-gram): ", list(cost_curve->control_points()));
  }
  return out;
}

absl::StatusOr<LoadedModel> LoadEngineModel(const EngineOptions& options) {
  LoadedModel loaded;
  loaded.model_path = options.model_path;
  loaded.adapter_path = options.adapter_path;
  if (loaded.model_path.empty()) {
    auto found = FindDefaultModel();
    if (!found.ok()) return WithPrefix("no --model given: ", found.status());
    loaded.model_path = *found;
  }
  // A model directory may bring its own Cross-Regression adapter (the default model
  // does, in adapter/); an explicit adapter path wins.
  if (loaded.adapter_path.empty()) loaded.adapter_path = BundledAdapter(loaded.model_path);
  const auto t0 = std::chrono::steady_clock::now();
  auto model = LoadModel(loaded.model_path);
  if (!model.ok()) return WithPrefix(absl::StrCat("cannot load model ", loaded.model_path, ": "), model.status());
  loaded.model = std::move(*model);
  if (IsQuantized(options.quantize)) {
    const int threads = options.cpu_threads > 0 ? options.cpu_threads : cpu::UsableCores();
    loaded.quantize_summary = QuantizeModel(*loaded.model, options.quantize, threads).Describe(options.quantize);
  }
  if (!loaded.adapter_path.empty()) {
    auto adapter = LoadLoraAdapter(loaded.adapter_path, loaded.model->config);
    if (!adapter.ok()) {
      return WithPrefix(absl::StrCat("cannot load adapter ", loaded.adapter_path, ": "), adapter.status());
    }
    loaded.adapter = std::move(*adapter);
  }
  loaded.ngram_table_path = options.ngram_table_path == "none"  ? std::string()
                            : options.ngram_table_path.empty() ? BundledNgramTable(loaded.model_path)
                                                               : options.ngram_table_path;
  if (!loaded.ngram_table_path.empty()) {
    auto table = NgramTable::Load(loaded.ngram_table_path, loaded.model->config.vocab_size);
    if (!table.ok()) return table.status();
    loaded.ngram_table = std::move(*table);
  }
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return loaded;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(LoadedModel loaded, const EngineOptions& options) {
  if (loaded.model == nullptr) return absl::InvalidArgumentError("OpenEngine: no model");
  auto engine = std::make_unique<Engine>();
  engine->model_path = std::move(loaded.model_path);
  engine->adapter_path = loaded.adapter != nullptr ? std::move(loaded.adapter_path) : "";
  engine->model = std::move(loaded.model);
  engine->adapter = std::move(loaded.adapter);
  engine->ngram_table_path = std::move(loaded.ngram_table_path);
  engine->ngram_table = std::move(loaded.ngram_table);
  engine->load_seconds = loaded.load_seconds;
  engine->quantize_summary = std::move(loaded.quantize_summary);
  const ModelConfig& config = engine->model->config;
  EngineOptions resolved = options;
  if (resolved.backend == BackendChoice::kAuto) {
    resolved.backend = CudaDeviceVisible() ? BackendChoice::kCuda : BackendChoice::kCpu;
  }
  engine->kv_dtype = options.kv_dtype.value_or(AutoKvDtype(*engine->model, resolved.backend));
  resolved.kv_dtype = engine->kv_dtype;
  auto kv = KvConfig(config, resolved);
  if (!kv.ok()) return kv.status();
  auto backend = CreateBackend(*engine->model, engine->adapter.get(), resolved, *kv);
  if (!backend.ok()) return backend.status();
  engine->backend = std::move(*backend);
  engine->kv = std::make_unique<PagedKvCache>(*kv);
  if (const int widest = std::max(options.cost_curve_rows, options.warm_up_rows); widest > 0) {
    const int rows = std::min(widest, config.max_position - 1);
    const int context = std::max(1, std::min(64, config.max_position - rows));
    auto curve = ForwardCostCurve::Measure(*engine->backend, *engine->kv, config, rows, context);
    if (!curve.ok()) return WithPrefix("measuring the forward cost curve: ", curve.status());
    if (options.cost_curve_rows > 0) engine->cost_curve = *std::move(curve);
  }
  return engine;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const EngineOptions& options) {
  auto loaded = LoadEngineModel(options);
  if (!loaded.ok()) return loaded.status();
  return OpenEngine(*std::move(loaded), options);
}

}  // namespace crossreg
