#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_lora.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/kernels.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

using cuda::Bf16;
using cuda::CudaContext;
using cuda::DeviceBuffer;

#define LAUNCH(expr, what) CROSSREG_CUDA_RETURN_IF_ERROR((expr), (what))

// Where each per-row integer array sits in the one packed upload of a forward.
struct PlanOffsets {
  size_t tokens, positions, slots, num_cached, num_own, group_begin, table_offset, block_tables, group_rows,
      predictive_rows, logit_rows;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelConfig& config, const KvCacheConfig& kv, std::unique_ptr<CudaContext> ctx,
              cuda::DeviceModelWeights weights, std::unique_ptr<cuda::DeviceLoraAdapter> adapter)
      : Backend(config, kv),
        cfg_(config),
        kv_cfg_(kv),
        ctx_(std::move(ctx)),
        weights_(std::move(weights)),
        adapter_(std::move(adapter)) {}

  // Allocates the paged K/V storage: num_blocks · block_size slots per layer.
  absl::Status AllocateKvStorage() {
    layer_kv_elements_ = int64_t{kv_cfg_.num_blocks} * kv_cfg_.block_size * cfg_.kv_dim();
    RETURN_IF_ERROR(k_store_.Allocate(static_cast<size_t>(layer_kv_elements_ * cfg_.num_layers)));
    RETURN_IF_ERROR(v_store_.Allocate(static_cast<size_t>(layer_kv_elements_ * cfg_.num_layers)));
    return absl::OkStatus();
  }

  std::string_view name() const override { return "cuda"; }
  std::string device() const override {
    const cudaDeviceProp& p = ctx_->properties();
    return absl::StrCat(p.name, " (sm_", p.major, p.minor, ", device ", ctx_->device(), ", ",
                        p.totalGlobalMem >> 20, " MiB)");
  }
  int64_t WeightBytesPerForward() const override { return weights_.LinearBytesPerForward(); }

 protected:
  absl::Status Compute(const ForwardPlan& plan, std::vector<float>& logits) override;

 private:
  absl::Status EnsureWorkspace(int rows, int predictive_rows, int logit_rows);
  PlanOffsets PackPlan(const ForwardPlan& plan);
  absl::Status RunLayer(int layer, const ForwardPlan& plan, const PlanOffsets& at);
  // y[:, col, col + out) of the predictive rows += scale · (x_p · Aᵀ) · Bᵀ, where x_p
  // (already gathered in lora_in_) holds their inputs.
  absl::Status AddLoraDelta(int layer, LoraTarget target, int64_t in, int64_t out, float* y, int64_t ldy,
                            int64_t col, int predictive, const int32_t* predictive_rows);
  absl::Status GatherLoraInput(const float* x, int64_t width, int predictive, const int32_t* predictive_rows);
  const int32_t* Ints(size_t offset) const { return ints_.data() + offset; }

  ModelConfig cfg_;
  KvCacheConfig kv_cfg_;
  std::unique_ptr<CudaContext> ctx_;
  cuda::DeviceModelWeights weights_;
  std::unique_ptr<cuda::DeviceLoraAdapter> adapter_;  // null: predictive rows use the base weights

  int64_t layer_kv_elements_ = 0;
  DeviceBuffer<float> k_store_;  // [layer][slot][kv_dim]
  DeviceBuffer<float> v_store_;

  // Per-forward workspace, grown to the largest batch seen.
  DeviceBuffer<float> x_, xn_, qkv_, att_, proj_, gate_up_, act_, pred_k_, pred_v_;
  DeviceBuffer<Bf16> gemm_in_;
  DeviceBuffer<float> lora_in_, lora_mid_, lora_out_;
  DeviceBuffer<float> head_in_, logits_dev_;
  DeviceBuffer<int32_t> ints_;
  std::vector<int32_t> host_ints_;
};

int64_t QkvWidth(const ModelConfig& c) { return c.q_dim() + 2 * int64_t{c.kv_dim()}; }

absl::Status CudaBackend::EnsureWorkspace(int rows, int predictive_rows, int logit_rows) {
  const size_t r = static_cast<size_t>(rows);
  const size_t hidden = static_cast<size_t>(cfg_.hidden_size);
  const size_t ffn = static_cast<size_t>(cfg_.intermediate_size);
  const size_t widest_in = std::max({hidden, static_cast<size_t>(cfg_.q_dim()), ffn});
  RETURN_IF_ERROR(x_.Reserve(r * hidden));
  RETURN_IF_ERROR(xn_.Reserve(r * hidden));
  RETURN_IF_ERROR(qkv_.Reserve(r * static_cast<size_t>(QkvWidth(cfg_))));
  RETURN_IF_ERROR(att_.Reserve(r * static_cast<size_t>(cfg_.q_dim())));
  RETURN_IF_ERROR(proj_.Reserve(r * hidden));
  RETURN_IF_ERROR(gate_up_.Reserve(r * 2 * ffn));
  RETURN_IF_ERROR(act_.Reserve(r * ffn));
  RETURN_IF_ERROR(pred_k_.Reserve(r * static_cast<size_t>(cfg_.kv_dim())));
  RETURN_IF_ERROR(pred_v_.Reserve(r * static_cast<size_t>(cfg_.kv_dim())));
  RETURN_IF_ERROR(gemm_in_.Reserve(r * widest_in));
  if (adapter_ != nullptr && predictive_rows > 0) {
    const size_t p = static_cast<size_t>(predictive_rows);
    const size_t widest_out = std::max({hidden, static_cast<size_t>(cfg_.q_dim()), ffn});
    RETURN_IF_ERROR(lora_in_.Reserve(p * widest_in));
    RETURN_IF_ERROR(lora_mid_.Reserve(p * static_cast<size_t>(std::max(adapter_->max_rank, 1))));
    RETURN_IF_ERROR(lora_out_.Reserve(p * widest_out));
  }
  if (logit_rows > 0) {
    RETURN_IF_ERROR(head_in_.Reserve(static_cast<size_t>(logit_rows) * hidden));
    RETURN_IF_ERROR(logits_dev_.Reserve(static_cast<size_t>(logit_rows) * static_cast<size_t>(cfg_.vocab_size)));
  }
  return absl::OkStatus();
}

// One host-to-device copy per forward for every integer the kernels read.
PlanOffsets CudaBackend::PackPlan(const ForwardPlan& plan) {
  host_ints_.clear();
  auto append = [&](const std::vector<int32_t>& v) {
    const size_t offset = host_ints_.size();
    host_ints_.insert(host_ints_.end(), v.begin(), v.end());
    if (v.empty()) host_ints_.push_back(0);  // keep regions distinct
    return offset;
  };
  PlanOffsets at;
  at.tokens = append(plan.tokens);
  at.positions = append(plan.positions);
  at.slots = append(plan.slots);
  at.num_cached = append(plan.num_cached);
  at.num_own = append(plan.num_own);
  at.group_begin = append(plan.group_begin);
  at.table_offset = append(plan.table_offset);
  at.block_tables = append(plan.block_tables);
  at.group_rows = append(plan.group_rows);
  at.predictive_rows = append(plan.predictive_rows);
  at.logit_rows = append(plan.logit_rows);
  return at;
}

absl::Status CudaBackend::Compute(const ForwardPlan& plan, std::vector<float>& logits) {
  const int rows = plan.rows;
  const int n_out = static_cast<int>(plan.logit_rows.size());
  const cudaStream_t stream = ctx_->stream();
  RETURN_IF_ERROR(ctx_->Activate());
  RETURN_IF_ERROR(EnsureWorkspace(rows, static_cast<int>(plan.predictive_rows.size()), n_out));

  const PlanOffsets at = PackPlan(plan);
  RETURN_IF_ERROR(ints_.Reserve(host_ints_.size()));
  LAUNCH(cudaMemcpyAsync(ints_.data(), host_ints_.data(), host_ints_.size() * sizeof(int32_t),
                         cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync (forward plan)");

  LAUNCH(cuda::LaunchEmbeddingGather(weights_.tok_embeddings.data(), cfg_.hidden_size, Ints(at.tokens), rows,
                                     x_.data(), stream),
         "embedding gather");
  for (int layer = 0; layer < cfg_.num_layers; ++layer) RETURN_IF_ERROR(RunLayer(layer, plan, at));

  // Output layer only for the rows that want logits.
  logits.resize(static_cast<size_t>(n_out) * cfg_.vocab_size);
  if (n_out > 0) {
    const int64_t hidden = cfg_.hidden_size;
    LAUNCH(cuda::LaunchGatherRows(x_.data(), hidden, cfg_.hidden_size, Ints(at.logit_rows), n_out, xn_.data(), stream),
           "gather logit rows");
    LAUNCH(cuda::LaunchRmsNorm(xn_.data(), weights_.final_norm.data(), n_out, cfg_.hidden_size, cfg_.rms_norm_eps,
                               head_in_.data(), stream),
           "final RMSNorm");
    LAUNCH(cuda::LaunchCastToBf16(head_in_.data(), gemm_in_.data(), n_out * hidden, stream), "cast (output)");
    RETURN_IF_ERROR(cuda::GemmBf16(*ctx_, gemm_in_.data(), n_out, hidden, weights_.output(), cfg_.vocab_size,
                                          logits_dev_.data(), cfg_.vocab_size));
    LAUNCH(cudaMemcpyAsync(logits.data(), logits_dev_.data(), logits.size() * sizeof(float), cudaMemcpyDeviceToHost,
                           stream),
           "cudaMemcpyAsync (logits)");
  }
  return ctx_->Synchronize();
}

absl::Status CudaBackend::GatherLoraInput(const float* x, int64_t width, int predictive,
                                          const int32_t* predictive_rows) {
  LAUNCH(cuda::LaunchGatherRows(x, width, static_cast<int>(width), predictive_rows, predictive, lora_in_.data(),
                                ctx_->stream()),
         "gather LoRA input");
  return absl::OkStatus();
}

absl::Status CudaBackend::AddLoraDelta(int layer, LoraTarget target, int64_t in, int64_t out, float* y, int64_t ldy,
                                       int64_t col, int predictive, const int32_t* predictive_rows) {
  const cuda::DeviceLoraMatrix& m = adapter_->at(layer, target);
  if (m.rank == 0) return absl::OkStatus();
  RETURN_IF_ERROR(cuda::GemmF32(*ctx_, lora_in_.data(), predictive, in, m.a.data(), m.rank, lora_mid_.data(),
                                       m.rank));
  RETURN_IF_ERROR(cuda::GemmF32(*ctx_, lora_mid_.data(), predictive, m.rank, m.b.data(), out, lora_out_.data(),
                                       out, m.scale));
  LAUNCH(cuda::LaunchScatterAddRows(lora_out_.data(), static_cast<int>(out), predictive_rows, predictive, y + col, ldy,
                                    ctx_->stream()),
         "LoRA scatter-add");
  return absl::OkStatus();
}

absl::Status CudaBackend::RunLayer(int layer, const ForwardPlan& plan, const PlanOffsets& at) {
  const cuda::DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const cudaStream_t stream = ctx_->stream();
  const int rows = plan.rows;
  const int64_t hidden = cfg_.hidden_size;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int64_t ffn = cfg_.intermediate_size;
  const int64_t qkv_w = QkvWidth(cfg_);
  const int predictive = adapter_ != nullptr ? static_cast<int>(plan.predictive_rows.size()) : 0;
  const int32_t* pred_rows = Ints(at.predictive_rows);

  // Attention block: one GEMM for Q, K and V.
  LAUNCH(cuda::LaunchRmsNorm(x_.data(), w.attn_norm.data(), rows, cfg_.hidden_size, cfg_.rms_norm_eps, xn_.data(),
                             stream),
         "attention RMSNorm");
  LAUNCH(cuda::LaunchCastToBf16(xn_.data(), gemm_in_.data(), rows * hidden, stream), "cast (qkv)");
  RETURN_IF_ERROR(cuda::GemmBf16(*ctx_, gemm_in_.data(), rows, hidden, w.wqkv.data(), qkv_w, qkv_.data(), qkv_w));
  if (predictive > 0) {
    RETURN_IF_ERROR(GatherLoraInput(xn_.data(), hidden, predictive, pred_rows));
    RETURN_IF_ERROR(AddLoraDelta(layer, LoraTarget::kQ, hidden, qd, qkv_.data(), qkv_w, 0, predictive, pred_rows));
    RETURN_IF_ERROR(AddLoraDelta(layer, LoraTarget::kK, hidden, kvd, qkv_.data(), qkv_w, qd, predictive, pred_rows));
    RETURN_IF_ERROR(
        AddLoraDelta(layer, LoraTarget::kV, hidden, kvd, qkv_.data(), qkv_w, qd + kvd, predictive, pred_rows));
  }
  if (w.bqkv.size() > 0) {
    LAUNCH(cuda::LaunchAddBias(qkv_.data(), rows, static_cast<int>(qkv_w), qkv_w, w.bqkv.data(), stream), "qkv bias");
  }
  LAUNCH(cuda::LaunchRope(qkv_.data(), rows, qkv_w, cfg_.num_heads, cfg_.head_dim, Ints(at.positions),
                          weights_.rope_inv_freq.data(), stream),
         "RoPE (q)");
  LAUNCH(cuda::LaunchRope(qkv_.data() + qd, rows, qkv_w, cfg_.num_kv_heads, cfg_.head_dim, Ints(at.positions),
                          weights_.rope_inv_freq.data(), stream),
         "RoPE (k)");
  float* k_layer = k_store_.data() + layer * layer_kv_elements_;
  float* v_layer = v_store_.data() + layer * layer_kv_elements_;
  // Control rows append to the cache before attention, so a row sees the earlier
  // rows of its own sequence in this batch; predictive rows keep K/V in scratch.
  LAUNCH(cuda::LaunchStoreKv(qkv_.data(), rows, qkv_w, static_cast<int>(qd), static_cast<int>(qd + kvd),
                             static_cast<int>(kvd), Ints(at.slots), k_layer, v_layer, pred_k_.data(), pred_v_.data(),
                             stream),
         "store K/V");
  cuda::PagedAttentionParams p;
  p.q = qkv_.data();
  p.q_stride = qkv_w;
  p.k_cache = k_layer;
  p.v_cache = v_layer;
  p.pred_k = pred_k_.data();
  p.pred_v = pred_v_.data();
  p.block_tables = Ints(at.block_tables);
  p.table_offset = Ints(at.table_offset);
  p.num_cached = Ints(at.num_cached);
  p.num_own = Ints(at.num_own);
  p.group_begin = Ints(at.group_begin);
  p.group_rows = Ints(at.group_rows);
  p.out = att_.data();
  p.out_stride = qd;
  p.rows = rows;
  p.num_heads = cfg_.num_heads;
  p.num_kv_heads = cfg_.num_kv_heads;
  p.head_dim = cfg_.head_dim;
  p.block_size = kv_cfg_.block_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim));
  LAUNCH(cuda::LaunchPagedAttention(p, stream), "paged attention");

  LAUNCH(cuda::LaunchCastToBf16(att_.data(), gemm_in_.data(), rows * qd, stream), "cast (o)");
  RETURN_IF_ERROR(cuda::GemmBf16(*ctx_, gemm_in_.data(), rows, qd, w.wo.data(), hidden, proj_.data(), hidden));
  if (predictive > 0) {
    RETURN_IF_ERROR(GatherLoraInput(att_.data(), qd, predictive, pred_rows));
    RETURN_IF_ERROR(AddLoraDelta(layer, LoraTarget::kO, qd, hidden, proj_.data(), hidden, 0, predictive, pred_rows));
  }
  LAUNCH(cuda::LaunchAddInPlace(x_.data(), proj_.data(), rows * hidden, stream), "residual (attention)");

  // Feed-forward block (SwiGLU): one GEMM for gate and up.
  LAUNCH(cuda::LaunchRmsNorm(x_.data(), w.ffn_norm.data(), rows, cfg_.hidden_size, cfg_.rms_norm_eps, xn_.data(),
                             stream),
         "FFN RMSNorm");
  LAUNCH(cuda::LaunchCastToBf16(xn_.data(), gemm_in_.data(), rows * hidden, stream), "cast (gate/up)");
  RETURN_IF_ERROR(
      cuda::GemmBf16(*ctx_, gemm_in_.data(), rows, hidden, w.w_gate_up.data(), 2 * ffn, gate_up_.data(), 2 * ffn));
  if (predictive > 0) {
    RETURN_IF_ERROR(GatherLoraInput(xn_.data(), hidden, predictive, pred_rows));
    RETURN_IF_ERROR(
        AddLoraDelta(layer, LoraTarget::kGate, hidden, ffn, gate_up_.data(), 2 * ffn, 0, predictive, pred_rows));
    RETURN_IF_ERROR(
        AddLoraDelta(layer, LoraTarget::kUp, hidden, ffn, gate_up_.data(), 2 * ffn, ffn, predictive, pred_rows));
  }
  LAUNCH(cuda::LaunchSwiGlu(gate_up_.data(), rows, static_cast<int>(ffn), act_.data(), stream), "SwiGLU");
  LAUNCH(cuda::LaunchCastToBf16(act_.data(), gemm_in_.data(), rows * ffn, stream), "cast (down)");
  RETURN_IF_ERROR(cuda::GemmBf16(*ctx_, gemm_in_.data(), rows, ffn, w.w_down.data(), hidden, proj_.data(), hidden));
  if (predictive > 0) {
    RETURN_IF_ERROR(GatherLoraInput(act_.data(), ffn, predictive, pred_rows));
    RETURN_IF_ERROR(
        AddLoraDelta(layer, LoraTarget::kDown, ffn, hidden, proj_.data(), hidden, 0, predictive, pred_rows));
  }
  LAUNCH(cuda::LaunchAddInPlace(x_.data(), proj_.data(), rows * hidden, stream), "residual (FFN)");
  return absl::OkStatus();
}

// Everything CreateCudaBackend checks before touching the device's memory.
absl::Status ValidateOptions(const ModelConfig& config, const CudaBackendOptions& options) {
  RETURN_IF_ERROR(cuda::CheckCudaDevice(options.device));
  RETURN_IF_ERROR(config.Validate());
  if (config.head_dim > cuda::kMaxHeadDim || config.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: head_dim ", config.head_dim,
                                                   " unsupported (even, at most ", cuda::kMaxHeadDim, ")"));
  }
  if (options.adapter != nullptr && options.adapter->layers.size() != static_cast<size_t>(config.num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: the adapter has ", options.adapter->layers.size(),
                                                   " layers, the model ", config.num_layers));
  }
  if (options.kv.block_size <= 0 || options.kv.num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: KV cache needs block_size > 0 and num_blocks > 0, got ",
                                                   options.kv.block_size, " and ", options.kv.num_blocks));
  }
  // Slots travel to the kernels as int32.
  if (int64_t{options.kv.num_blocks} * options.kv.block_size > INT_MAX) {
    return absl::InvalidArgumentError("CUDA backend: num_blocks * block_size exceeds 2^31 slots");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> Finish(const ModelConfig& config, const CudaBackendOptions& options,
                                                std::unique_ptr<CudaContext> ctx, cuda::DeviceModelWeights weights) {
  std::unique_ptr<cuda::DeviceLoraAdapter> adapter;
  if (options.adapter != nullptr) {
    absl::StatusOr<cuda::DeviceLoraAdapter> uploaded = cuda::UploadLoraAdapter(*ctx, *options.adapter);
    if (!uploaded.ok()) return uploaded.status();
    adapter = std::make_unique<cuda::DeviceLoraAdapter>(std::move(*uploaded));
  }
  auto backend = std::make_unique<CudaBackend>(config, options.kv, std::move(ctx), std::move(weights), std::move(adapter));
  RETURN_IF_ERROR(backend->AllocateKvStorage());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace

bool CudaDeviceAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const Model& model, const CudaBackendOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(model.config, options));
  absl::StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(options.device);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<cuda::DeviceModelWeights> weights = cuda::UploadModelWeights(**ctx, model);
  if (!weights.ok()) return weights.status();
  return Finish(model.config, options, std::move(*ctx), std::move(*weights));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackendWithRandomWeights(const ModelConfig& config,
                                                                            const CudaBackendOptions& options,
                                                                            uint64_t seed) {
  RETURN_IF_ERROR(ValidateOptions(config, options));
  absl::StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(options.device);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<cuda::DeviceModelWeights> weights = cuda::MakeRandomDeviceWeights(**ctx, config, seed);
  if (!weights.ok()) return weights.status();
  return Finish(config, options, std::move(*ctx), std::move(*weights));
}

}  // namespace crossreg
