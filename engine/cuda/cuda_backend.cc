#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
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

// Where each per-row integer array sits in the one packed upload of a forward. The
// block tables come last: their length grows with the context, and every other
// offset then depends only on the batch's shape (a CUDA graph's key).
struct PlanOffsets {
  size_t tokens, positions, slots, num_cached, num_own, group_begin, table_offset, group_rows, predictive_rows,
      logit_rows, tile_first, tile_rows, block_tables;
  bool operator==(const PlanOffsets&) const = default;
};

// What a captured forward depends on besides the device buffers' addresses: the
// launch shapes (rows, predictive rows, logit rows, the split choice) and where the
// kernels read their integers.
struct GraphKey {
  int rows = 0, predictive = 0, logit_rows = 0;
  int attention_tiles = 0, attention_tile_rows = 0;
  int control_tiles = 0, control_tile_rows = 0, predictive_tile_rows = 0, predictive_splits = 0;
  bool predictive_mma = false;
  bool split_attention = false;
  PlanOffsets at{};
  bool operator==(const GraphKey&) const = default;
};

// Forwards up to this many rows run as CUDA graphs (decode and verify shapes); larger
// ones (prefill) are rare per shape and launch eagerly.
constexpr int kMaxGraphRows = 512;
// Captured shapes kept; a full cache is emptied (shapes repeat in steady decoding).
constexpr size_t kMaxGraphs = 64;
// The attention's split workspace is used while it stays under this size.
constexpr size_t kMaxSplitBytes = size_t{256} << 20;

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelConfig& config, const KvCacheConfig& kv, std::unique_ptr<CudaContext> ctx,
              cuda::DeviceModelWeights weights, std::unique_ptr<cuda::DeviceLoraAdapter> adapter, bool use_graphs,
              KvDtype kv_dtype, int predictive_attention_splits, bool predictive_attention_mma,
              bool device_summaries)
      : Backend(config, kv),
        cfg_(config),
        kv_cfg_(kv),
        ctx_(std::move(ctx)),
        weights_(std::move(weights)),
        adapter_(std::move(adapter)),
        use_graphs_(use_graphs),
        predictive_attention_splits_(predictive_attention_splits),
        predictive_attention_mma_(predictive_attention_mma),
        device_summaries_(device_summaries),
        kv_element_(kv_dtype == KvDtype::kBf16 ? cuda::KvElement::kBf16 : cuda::KvElement::kF32) {}
  ~CudaBackend() override { ClearGraphs(); }

  // Allocates the paged K/V storage: num_blocks · block_size slots per layer.
  absl::Status AllocateKvStorage() {
    layer_kv_bytes_ = int64_t{kv_cfg_.num_blocks} * kv_cfg_.block_size * cfg_.kv_dim() * KvElementBytes();
    RETURN_IF_ERROR(k_store_.Allocate(static_cast<size_t>(layer_kv_bytes_ * cfg_.num_layers)));
    RETURN_IF_ERROR(v_store_.Allocate(static_cast<size_t>(layer_kv_bytes_ * cfg_.num_layers)));
    return absl::OkStatus();
  }
  int64_t KvElementBytes() const { return kv_element_ == cuda::KvElement::kBf16 ? 2 : 4; }
  cuda::KvCacheRef LayerCache(int layer) {
    return {k_store_.data() + layer * layer_kv_bytes_, v_store_.data() + layer * layer_kv_bytes_, kv_element_};
  }

  std::string_view name() const override { return "cuda"; }
  std::string device() const override {
    const cudaDeviceProp& p = ctx_->properties();
    return absl::StrCat(p.name, " (sm_", p.major, p.minor, ", device ", ctx_->device(), ", ",
                        p.totalGlobalMem >> 20, " MiB, weights ", fp8_scratch_.size() > 0 ? "fp8" : "bf16", ", K/V ",
                        kv_element_ == cuda::KvElement::kBf16 ? "bf16" : "f32", ")");
  }
  int64_t WeightBytesPerForward() const override { return weights_.LinearBytesPerForward(); }

  // FP8 weights: the bf16 scratch that forwards wider than the FP8 GEMV dequantize each
  // layer matrix into, allocated once so that captured graphs keep its address.
  absl::Status AllocateFp8Scratch() {
    return fp8_scratch_.Allocate(static_cast<size_t>(weights_.LargestFp8Matrix()));
  }
  Bf16* Fp8Scratch() { return fp8_scratch_.size() > 0 ? fp8_scratch_.data() : nullptr; }

 protected:
  absl::Status Compute(const ForwardPlan& plan, ForwardOutput& out) override;

 private:
  struct Graph {
    GraphKey key;
    int sightings = 0;
    cudaGraphExec_t exec = nullptr;
  };

  absl::Status EnsureWorkspace(int rows, int predictive_rows, int logit_rows, bool split_attention);
  // Where the workspace buffers are: a captured graph holds these addresses.
  using WorkspaceAddresses = std::array<const void*, 14>;
  WorkspaceAddresses Addresses() const {
    return {x_.data(),       xn_.data(),          qkv_.data(),      att_.data(),     gate_up_.data(),
            act_.data(),     pred_k_.data(),      pred_v_.data(),   gemm_in_.data(), att_partial_.data(),
            lora_mid_.data(), head_in_.data(),    logits_dev_.data(), att_counters_.data()};
  }
  // apart: predictive rows tiled and split apart from control rows (mma: tensor-core tiles).
  PlanOffsets PackPlan(const ForwardPlan& plan, bool apart, bool mma);
  // Every kernel and GEMM of the forward, on the stream (eagerly or into a capture).
  absl::Status EnqueueForward(const GraphKey& key);
  // After the forward: copies every logit row and summarises on the host, or (device
  // summaries) reduces the summary rows on the device and copies the summaries and the
  // whole rows (runs of consecutive ones, one copy each) to `out`.
  absl::Status CopyLogitRows(const ForwardPlan& plan, size_t summary_ints, ForwardOutput& out);
  absl::Status EnqueueLayer(int layer, const GraphKey& key);
  absl::Status RunCaptured(Graph& graph);
  void ClearGraphs();
  // The predictive rows' LoRA update for `targets` (which read the same input `x`),
  // added into y's columns.
  absl::Status AddLora(int layer, std::initializer_list<std::pair<LoraTarget, int64_t>> targets, const float* x,
                       int64_t x_stride, int64_t in, float* y, int64_t ldy, const GraphKey& key);
  const int32_t* Ints(size_t offset) const { return ints_.data() + offset; }

  ModelConfig cfg_;
  KvCacheConfig kv_cfg_;
  std::unique_ptr<CudaContext> ctx_;
  cuda::DeviceModelWeights weights_;
  std::unique_ptr<cuda::DeviceLoraAdapter> adapter_;  // null: predictive rows use the base weights
  bool use_graphs_;
  int predictive_attention_splits_;  // CudaBackendOptions::predictive_attention_splits
  bool predictive_attention_mma_;    //   and ::predictive_attention_mma
  bool device_summaries_;            //   and ::device_summaries
  std::vector<float> host_logits_;   // every logit row, when summaries are made on the host
  cuda::KvElement kv_element_;

  int64_t layer_kv_bytes_ = 0;
  DeviceBuffer<unsigned char> k_store_;  // [layer][slot][kv_dim] of kv_element_
  DeviceBuffer<unsigned char> v_store_;

  // Per-forward workspace, grown to the largest batch seen. A growth moves buffers,
  // so it drops every captured graph (they hold the old addresses).
  DeviceBuffer<float> x_, xn_, qkv_, att_, gate_up_, act_, pred_k_, pred_v_, att_partial_;
  DeviceBuffer<int32_t> att_counters_;
  DeviceBuffer<Bf16> gemm_in_;
  DeviceBuffer<Bf16> fp8_scratch_;
  DeviceBuffer<float> lora_mid_;
  DeviceBuffer<float> head_in_, logits_dev_;
  DeviceBuffer<cuda::LogitSummary> summaries_dev_;  // written after the forward, never in a graph
  DeviceBuffer<int32_t> ints_;
  std::vector<int32_t> host_ints_;
  std::vector<int32_t> tiles_;
  cuda::AttentionTiles tile_plan_;
  std::vector<Graph> graphs_;
};

int64_t QkvWidth(const ModelConfig& c) { return c.q_dim() + 2 * int64_t{c.kv_dim()}; }

absl::Status CudaBackend::EnsureWorkspace(int rows, int predictive_rows, int logit_rows, bool split_attention) {
  const WorkspaceAddresses before = Addresses();
  const size_t r = static_cast<size_t>(rows);
  const size_t hidden = static_cast<size_t>(cfg_.hidden_size);
  const size_t ffn = static_cast<size_t>(cfg_.intermediate_size);
  const size_t widest_in = std::max({hidden, static_cast<size_t>(cfg_.q_dim()), ffn});
  RETURN_IF_ERROR(x_.Reserve(r * hidden));
  RETURN_IF_ERROR(xn_.Reserve(r * hidden));
  RETURN_IF_ERROR(qkv_.Reserve(r * static_cast<size_t>(QkvWidth(cfg_))));
  RETURN_IF_ERROR(att_.Reserve(r * static_cast<size_t>(cfg_.q_dim())));
  RETURN_IF_ERROR(gate_up_.Reserve(r * 2 * ffn));
  RETURN_IF_ERROR(act_.Reserve(r * ffn));
  RETURN_IF_ERROR(pred_k_.Reserve(r * static_cast<size_t>(cfg_.kv_dim())));
  RETURN_IF_ERROR(pred_v_.Reserve(r * static_cast<size_t>(cfg_.kv_dim())));
  RETURN_IF_ERROR(gemm_in_.Reserve(r * widest_in));
  if (split_attention) {
    RETURN_IF_ERROR(att_partial_.Reserve(cuda::AttentionPartialFloats(rows, cfg_.num_heads, cfg_.head_dim)));
    const size_t counters = static_cast<size_t>(rows) * cfg_.num_heads;
    if (att_counters_.size() < counters) {
      RETURN_IF_ERROR(att_counters_.Allocate(counters));
      LAUNCH(cudaMemsetAsync(att_counters_.data(), 0, counters * sizeof(int32_t), ctx_->stream()),
             "cudaMemsetAsync (attention split counters)");
    }
  }
  if (adapter_ != nullptr && predictive_rows > 0) {
    const size_t group_rank = static_cast<size_t>(cuda::kMaxLoraTargetsPerGroup * std::max(adapter_->max_rank, 1));
    const int widest_in = static_cast<int>(std::max<int64_t>({cfg_.hidden_size, cfg_.q_dim(), cfg_.intermediate_size}));
    size_t splits = 1;
    for (int in : {cfg_.hidden_size, cfg_.q_dim(), widest_in}) splits = std::max<size_t>(splits, cuda::LoraShrinkSplits(in));
    RETURN_IF_ERROR(lora_mid_.Reserve(splits * static_cast<size_t>(predictive_rows) * group_rank));
  }
  if (logit_rows > 0) {
    RETURN_IF_ERROR(head_in_.Reserve(static_cast<size_t>(logit_rows) * hidden));
    RETURN_IF_ERROR(logits_dev_.Reserve(static_cast<size_t>(logit_rows) * static_cast<size_t>(cfg_.vocab_size)));
  }
  if (before != Addresses()) ClearGraphs();
  return absl::OkStatus();
}

// One host-to-device copy per forward for every integer the kernels read.
PlanOffsets CudaBackend::PackPlan(const ForwardPlan& plan, bool apart, bool mma) {
  host_ints_.clear();
  auto append_range = [&](const int32_t* data, size_t count) {
    const size_t offset = host_ints_.size();
    host_ints_.insert(host_ints_.end(), data, data + count);
    if (count == 0) host_ints_.push_back(0);  // keep regions distinct
    return offset;
  };
  auto append = [&](const std::vector<int32_t>& v) { return append_range(v.data(), v.size()); };
  PlanOffsets at;
  at.tokens = append(plan.tokens);
  at.positions = append(plan.positions);
  at.slots = append(plan.slots);
  at.num_cached = append(plan.num_cached);
  at.num_own = append(plan.num_own);
  at.group_begin = append(plan.group_begin);
  at.table_offset = append(plan.table_offset);
  at.group_rows = append(plan.group_rows);
  at.predictive_rows = append(plan.predictive_rows);
  at.logit_rows = append(plan.logit_rows);
  // The attention's row tiles (rows of one sequence sharing the cached keys' loads).
  tiles_.resize(2 * static_cast<size_t>(plan.rows));
  tile_plan_ = cuda::PlanAttentionTiles(
      plan.table_offset.data(), plan.num_cached.data(), plan.num_own.data(), plan.rows, tiles_.data(),
      tiles_.data() + plan.rows, apart, plan.group_begin.data(),
      mma ? cuda::PredictiveAttentionMmaTileRows(cfg_.num_heads, cfg_.num_kv_heads) : cuda::kAttentionTileRows);
  at.tile_first = append_range(tiles_.data(), static_cast<size_t>(plan.rows));
  at.tile_rows = append_range(tiles_.data() + plan.rows, static_cast<size_t>(plan.rows));
  at.block_tables = append(plan.block_tables);
  return at;
}

void CudaBackend::ClearGraphs() {
  for (Graph& g : graphs_) {
    if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  }
  graphs_.clear();
}

static_assert(sizeof(cuda::LogitSummary) == sizeof(RowSummary) &&
                  offsetof(cuda::LogitSummary, argmax) == offsetof(RowSummary, argmax) &&
                  offsetof(cuda::LogitSummary, max_logit) == offsetof(RowSummary, max_logit) &&
                  offsetof(cuda::LogitSummary, token_logit) == offsetof(RowSummary, token_logit),
              "the device's summaries are copied into RowSummary as they are");

absl::Status CudaBackend::Compute(const ForwardPlan& plan, ForwardOutput& out) {
  const cudaStream_t stream = ctx_->stream();
  RETURN_IF_ERROR(ctx_->Activate());
  GraphKey key;
  key.rows = plan.rows;
  key.predictive = adapter_ != nullptr ? static_cast<int>(plan.predictive_rows.size()) : 0;
  key.logit_rows = static_cast<int>(plan.logit_rows.size());
  key.split_attention =
      cuda::AttentionPartialFloats(plan.rows, cfg_.num_heads, cfg_.head_dim) * sizeof(float) <= kMaxSplitBytes;
  RETURN_IF_ERROR(EnsureWorkspace(key.rows, key.predictive, key.logit_rows, key.split_attention));

  // Predictive rows apart only on the split path (huge forwards walk rows whole).
  const bool apart = predictive_attention_splits_ >= 0 && key.split_attention;
  const bool mma = apart && predictive_attention_mma_ && cuda::PredictiveAttentionMmaSupported(cfg_.head_dim);
  key.at = PackPlan(plan, apart, mma);
  // The summaries' rows and tokens go after everything a captured graph reads, so they
  // leave the graph's key alone; summarised on the host, the device never sees them, and a
  // summary forward uploads exactly what its whole-row twin does.
  const size_t summary_ints = host_ints_.size();
  if (device_summaries_) {
    host_ints_.insert(host_ints_.end(), plan.summary_rows.begin(), plan.summary_rows.end());
    host_ints_.insert(host_ints_.end(), plan.summary_tokens.begin(), plan.summary_tokens.end());
  }
  key.attention_tiles = tile_plan_.tiles;
  key.attention_tile_rows = tile_plan_.max_rows;
  if (apart && tile_plan_.control_tiles < tile_plan_.tiles) {
    key.predictive_mma = mma;
    key.control_tiles = tile_plan_.control_tiles;
    key.control_tile_rows = tile_plan_.control_max_rows;
    key.predictive_tile_rows = tile_plan_.predictive_max_rows;
    const int head_groups = cfg_.num_heads / cuda::AttentionHeadsPerBlock(cfg_.num_heads, cfg_.num_kv_heads);
    key.predictive_splits =
        predictive_attention_splits_ > 0
            ? std::min(predictive_attention_splits_, cuda::kAttentionSplits)
            : cuda::PredictiveAttentionSplits(tile_plan_.tiles - tile_plan_.control_tiles, head_groups,
                                              ctx_->properties().multiProcessorCount);
  }
  if (host_ints_.size() > ints_.size()) {
    // Headroom for the block tables' growth, so the buffer (and the graphs) rarely move.
    RETURN_IF_ERROR(ints_.Allocate(host_ints_.size() + 4096));
    ClearGraphs();
  }
  LAUNCH(cudaMemcpyAsync(ints_.data(), host_ints_.data(), host_ints_.size() * sizeof(int32_t),
                         cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync (forward plan)");

  if (!use_graphs_ || key.rows > kMaxGraphRows) {
    RETURN_IF_ERROR(EnqueueForward(key));
  } else {
    auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const Graph& g) { return g.key == key; });
    if (it == graphs_.end()) {
      if (graphs_.size() >= kMaxGraphs) ClearGraphs();
      graphs_.push_back(Graph{key, 0, nullptr});
      it = graphs_.end() - 1;
    }
    // A shape seen once runs eagerly; from the second time on it is captured once and replayed.
    if (++it->sightings < 2) {
      RETURN_IF_ERROR(EnqueueForward(key));
    } else {
      RETURN_IF_ERROR(RunCaptured(*it));
    }
  }

  RETURN_IF_ERROR(CopyLogitRows(plan, summary_ints, out));
  return ctx_->Synchronize();
}

absl::Status CudaBackend::CopyLogitRows(const ForwardPlan& plan, size_t summary_ints, ForwardOutput& out) {
  const cudaStream_t stream = ctx_->stream();
  const size_t vocab = static_cast<size_t>(cfg_.vocab_size);
  const int summaries = static_cast<int>(plan.summary_rows.size());
  if (summaries > 0 && !device_summaries_) {
    // Every logit row to the host, summarised there (CudaBackendOptions::device_summaries).
    host_logits_.resize(plan.logit_rows.size() * vocab);
    if (!host_logits_.empty()) {
      LAUNCH(cudaMemcpyAsync(host_logits_.data(), logits_dev_.data(), host_logits_.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync (logits)");
    }
    RETURN_IF_ERROR(ctx_->Synchronize());
    SplitLogitRows(plan, host_logits_, cfg_.vocab_size, out);
    return absl::OkStatus();
  }
  out.summaries.resize(static_cast<size_t>(summaries));
  out.logits.resize(static_cast<size_t>(plan.full_logit_rows()) * vocab);
  if (summaries > 0) {
    RETURN_IF_ERROR(summaries_dev_.Reserve(static_cast<size_t>(summaries)));
    LAUNCH(cuda::LaunchSummarizeLogitRows(logits_dev_.data(), cfg_.vocab_size, Ints(summary_ints),
                                          Ints(summary_ints + static_cast<size_t>(summaries)), summaries,
                                          summaries_dev_.data(), stream),
           "summarize logit rows");
    LAUNCH(cudaMemcpyAsync(out.summaries.data(), summaries_dev_.data(), out.summaries.size() * sizeof(RowSummary),
                           cudaMemcpyDeviceToHost, stream),
           "cudaMemcpyAsync (row summaries)");
  }
  // Whole rows: logit rows j not in summary_rows (both ascend), a copy per run.
  const size_t rows = plan.logit_rows.size();
  size_t next_summary = 0, copied = 0, j = 0;
  auto is_summary = [&](size_t row) {
    return next_summary < plan.summary_rows.size() && static_cast<size_t>(plan.summary_rows[next_summary]) == row;
  };
  while (j < rows) {
    if (is_summary(j)) {
      ++next_summary;
      ++j;
      continue;
    }
    size_t end = j;
    while (end < rows && !is_summary(end)) ++end;
    LAUNCH(cudaMemcpyAsync(out.logits.data() + copied * vocab, logits_dev_.data() + j * vocab,
                           (end - j) * vocab * sizeof(float), cudaMemcpyDeviceToHost, stream),
           "cudaMemcpyAsync (logits)");
    copied += end - j;
    j = end;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::RunCaptured(Graph& graph) {
  const cudaStream_t stream = ctx_->stream();
  if (graph.exec == nullptr) {
    LAUNCH(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    const absl::Status enqueued = EnqueueForward(graph.key);
    cudaGraph_t captured = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
    if (!enqueued.ok()) {
      if (captured != nullptr) cudaGraphDestroy(captured);
      return enqueued;
    }
    LAUNCH(ended, "cudaStreamEndCapture");
    const cudaError_t made = cudaGraphInstantiate(&graph.exec, captured, 0);
    cudaGraphDestroy(captured);
    if (made != cudaSuccess) graph.exec = nullptr;
    LAUNCH(made, "cudaGraphInstantiate");
  }
  LAUNCH(cudaGraphLaunch(graph.exec, stream), "cudaGraphLaunch");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueForward(const GraphKey& key) {
  const cudaStream_t stream = ctx_->stream();
  const int rows = key.rows;
  const int n_out = key.logit_rows;
  LAUNCH(cuda::LaunchEmbeddingGather(weights_.tok_embeddings.data(), cfg_.hidden_size, Ints(key.at.tokens), rows,
                                     x_.data(), stream),
         "embedding gather");
  for (int layer = 0; layer < cfg_.num_layers; ++layer) RETURN_IF_ERROR(EnqueueLayer(layer, key));

  // Output layer only for the rows that want logits.
  if (n_out > 0) {
    const int64_t hidden = cfg_.hidden_size;
    LAUNCH(cuda::LaunchGatherRows(x_.data(), hidden, cfg_.hidden_size, Ints(key.at.logit_rows), n_out, xn_.data(),
                                  stream),
           "gather logit rows");
    LAUNCH(cuda::LaunchRmsNorm(xn_.data(), weights_.final_norm.data(), n_out, cfg_.hidden_size, cfg_.rms_norm_eps,
                               head_in_.data(), stream, gemm_in_.data()),
           "final RMSNorm");
    RETURN_IF_ERROR(cuda::GemmBf16(*ctx_, gemm_in_.data(), n_out, hidden, weights_.output(), cfg_.vocab_size,
                                   logits_dev_.data(), cfg_.vocab_size));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::AddLora(int layer, std::initializer_list<std::pair<LoraTarget, int64_t>> targets,
                                  const float* x, int64_t x_stride, int64_t in, float* y, int64_t ldy,
                                  const GraphKey& key) {
  cuda::LoraGroup g;
  for (const auto& [target, col] : targets) {
    const cuda::DeviceLoraMatrix& m = adapter_->at(layer, target);
    if (m.rank == 0) continue;
    g.a[g.targets] = m.a.data();
    g.b[g.targets] = m.b.data();
    g.rank[g.targets] = m.rank;
    g.out[g.targets] = static_cast<int>(m.b.size() / static_cast<size_t>(m.rank));
    g.col[g.targets] = col;
    g.scale[g.targets] = m.scale;
    ++g.targets;
  }
  if (g.targets == 0) return absl::OkStatus();
  const int32_t* rows = Ints(key.at.predictive_rows);
  LAUNCH(cuda::LaunchLoraShrink(g, x, x_stride, static_cast<int>(in), rows, key.predictive, lora_mid_.data(),
                                ctx_->stream()),
         "LoRA shrink");
  LAUNCH(cuda::LaunchLoraExpand(g, lora_mid_.data(), static_cast<int>(in), rows, key.predictive, y, ldy,
                                ctx_->stream()),
         "LoRA expand");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueLayer(int layer, const GraphKey& key) {
  const cuda::DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const cudaStream_t stream = ctx_->stream();
  const int rows = key.rows;
  const int64_t hidden = cfg_.hidden_size;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int64_t ffn = cfg_.intermediate_size;
  const int64_t qkv_w = QkvWidth(cfg_);
  const bool lora = key.predictive > 0;

  // Attention block: RMSNorm writes the GEMM's bf16 input too; one GEMM for Q, K and V.
  LAUNCH(cuda::LaunchRmsNorm(x_.data(), w.attn_norm.data(), rows, cfg_.hidden_size, cfg_.rms_norm_eps, xn_.data(),
                             stream, gemm_in_.data()),
         "attention RMSNorm");
  RETURN_IF_ERROR(cuda::GemmLinear(*ctx_, gemm_in_.data(), rows, w.wqkv, qkv_.data(), qkv_w, 0.0f, Fp8Scratch()));
  if (lora) {
    RETURN_IF_ERROR(AddLora(layer, {{LoraTarget::kQ, 0}, {LoraTarget::kK, qd}, {LoraTarget::kV, qd + kvd}},
                            xn_.data(), hidden, hidden, qkv_.data(), qkv_w, key));
  }
  if (w.bqkv.size() > 0) {
    LAUNCH(cuda::LaunchAddBias(qkv_.data(), rows, static_cast<int>(qkv_w), qkv_w, w.bqkv.data(), stream), "qkv bias");
  }
  const cuda::KvCacheRef cache = LayerCache(layer);
  // RoPE on Q and K, and K/V stored, in one launch. Control rows append to the cache
  // before attention, so a row sees the earlier rows of its own sequence in this
  // batch; predictive rows keep K/V in scratch.
  LAUNCH(cuda::LaunchRopeStoreKv(qkv_.data(), rows, qkv_w, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim,
                                 Ints(key.at.positions), weights_.rope_inv_freq.data(), Ints(key.at.slots), cache,
                                 pred_k_.data(), pred_v_.data(), stream),
         "RoPE and K/V store");
  cuda::PagedAttentionParams p;
  p.q = qkv_.data();
  p.q_stride = qkv_w;
  p.k_cache = cache.k;
  p.v_cache = cache.v;
  p.cache_element = cache.element;
  p.pred_k = pred_k_.data();
  p.pred_v = pred_v_.data();
  p.block_tables = Ints(key.at.block_tables);
  p.table_offset = Ints(key.at.table_offset);
  p.num_cached = Ints(key.at.num_cached);
  p.num_own = Ints(key.at.num_own);
  p.group_begin = Ints(key.at.group_begin);
  p.group_rows = Ints(key.at.group_rows);
  p.tile_first = Ints(key.at.tile_first);
  p.tile_rows = Ints(key.at.tile_rows);
  p.tiles = key.attention_tiles;
  p.max_tile_rows = key.attention_tile_rows;
  p.predictive_splits = key.predictive_splits;
  p.predictive_mma = key.predictive_mma;
  p.control_tiles = key.control_tiles;
  p.control_max_tile_rows = key.control_tile_rows;
  p.predictive_max_tile_rows = key.predictive_tile_rows;
  p.out = att_.data();
  p.out_bf16 = gemm_in_.data();
  p.out_stride = qd;
  if (key.split_attention) {
    p.partial_acc = att_partial_.data();
    p.partial_ml = att_partial_.data() + static_cast<size_t>(rows) * cfg_.num_heads * cuda::kAttentionSplits * cfg_.head_dim;
    p.split_counters = att_counters_.data();
  }
  p.rows = rows;
  p.num_heads = cfg_.num_heads;
  p.num_kv_heads = cfg_.num_kv_heads;
  p.head_dim = cfg_.head_dim;
  p.block_size = kv_cfg_.block_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim));
  // An error an earlier call left pending would surface here as this launch's.
  const cudaError_t pending = cudaPeekAtLastError();
  if (const cudaError_t err = cuda::LaunchPagedAttention(p, stream); err != cudaSuccess) {
    return cuda::CudaStatus(
        err, absl::StrCat("paged attention (", cuda::DescribeAttentionLaunch(p),
                          pending != cudaSuccess ? absl::StrCat("; pending before it: ", cudaGetErrorName(pending)) : "",
                          ")")
                 .c_str());
  }

  // O projection accumulates straight into the residual stream (beta = 1).
  RETURN_IF_ERROR(cuda::GemmLinear(*ctx_, gemm_in_.data(), rows, w.wo, x_.data(), hidden, 1.0f, Fp8Scratch()));
  if (lora) RETURN_IF_ERROR(AddLora(layer, {{LoraTarget::kO, 0}}, att_.data(), qd, qd, x_.data(), hidden, key));

  // Feed-forward block (SwiGLU): one GEMM for gate and up; SwiGLU writes the down GEMM's input.
  LAUNCH(cuda::LaunchRmsNorm(x_.data(), w.ffn_norm.data(), rows, cfg_.hidden_size, cfg_.rms_norm_eps, xn_.data(),
                             stream, gemm_in_.data()),
         "FFN RMSNorm");
  RETURN_IF_ERROR(
      cuda::GemmLinear(*ctx_, gemm_in_.data(), rows, w.w_gate_up, gate_up_.data(), 2 * ffn, 0.0f, Fp8Scratch()));
  if (lora) {
    RETURN_IF_ERROR(AddLora(layer, {{LoraTarget::kGate, 0}, {LoraTarget::kUp, ffn}}, xn_.data(), hidden, hidden,
                            gate_up_.data(), 2 * ffn, key));
  }
  LAUNCH(cuda::LaunchSwiGlu(gate_up_.data(), rows, static_cast<int>(ffn), act_.data(), stream, gemm_in_.data()),
         "SwiGLU");
  RETURN_IF_ERROR(cuda::GemmLinear(*ctx_, gemm_in_.data(), rows, w.w_down, x_.data(), hidden, 1.0f, Fp8Scratch()));
  if (lora) RETURN_IF_ERROR(AddLora(layer, {{LoraTarget::kDown, 0}}, act_.data(), ffn, ffn, x_.data(), hidden, key));
  return absl::OkStatus();
}

cuda::DeviceWeightFormat DeviceFormat(const CudaBackendOptions& options) {
  return options.weights == CudaWeights::kFp8 ? cuda::DeviceWeightFormat::kFp8 : cuda::DeviceWeightFormat::kBf16;
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
  if (options.weights == CudaWeights::kFp8) {
    for (int64_t in : std::initializer_list<int64_t>{config.hidden_size, config.q_dim(), config.intermediate_size}) {
      if (in % 16 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "CUDA backend: --weights fp8 needs hidden_size, q_dim and intermediate_size divisible by 16; one is ", in));
      }
    }
  }
  if (options.predictive_attention_splits < -1 || options.predictive_attention_splits > cuda::kAttentionSplits) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: predictive_attention_splits must be -1, 0 or 1..",
                                                   cuda::kAttentionSplits, ", got ",
                                                   options.predictive_attention_splits));
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
  auto backend = std::make_unique<CudaBackend>(config, options.kv, std::move(ctx), std::move(weights),
                                               std::move(adapter), options.use_graphs, options.kv_dtype,
                                               options.predictive_attention_splits,
                                               options.predictive_attention_mma, options.device_summaries);
  RETURN_IF_ERROR(backend->AllocateKvStorage());
  RETURN_IF_ERROR(backend->AllocateFp8Scratch());
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
  absl::StatusOr<cuda::DeviceModelWeights> weights = cuda::UploadModelWeights(**ctx, model, DeviceFormat(options));
  if (!weights.ok()) return weights.status();
  return Finish(model.config, options, std::move(*ctx), std::move(*weights));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackendWithRandomWeights(const ModelConfig& config,
                                                                            const CudaBackendOptions& options,
                                                                            uint64_t seed) {
  RETURN_IF_ERROR(ValidateOptions(config, options));
  absl::StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(options.device);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<cuda::DeviceModelWeights> weights =
      cuda::MakeRandomDeviceWeights(**ctx, config, seed, DeviceFormat(options));
  if (!weights.ok()) return weights.status();
  return Finish(config, options, std::move(*ctx), std::move(*weights));
}

}  // namespace crossreg
