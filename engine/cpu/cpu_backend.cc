#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/lora_delta.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/thread_pool.h"
#include "engine/forward_plan.h"

namespace crossreg {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const CpuBackendOptions& options)
      : model_(model),
        adapter_(options.adapter),
        cfg_(model.config),
        kv_cfg_(options.kv),
        pool_(options.num_threads),
        inv_freq_(cfg_.RopeInverseFrequencies()) {
    const size_t per_layer =
        static_cast<size_t>(kv_cfg_.num_blocks) * kv_cfg_.block_size * cfg_.kv_dim();
    k_store_.assign(per_layer * cfg_.num_layers, 0.0f);
    v_store_.assign(per_layer * cfg_.num_layers, 0.0f);
  }

  std::string_view name() const override { return "cpu"; }

  int64_t WeightBytesPerForward() const override {
    int64_t bytes = static_cast<int64_t>(model_.weights.output.nbytes());
    for (const auto& l : model_.weights.layers) {
      for (const TensorRef* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        bytes += static_cast<int64_t>(t->nbytes());
      }
    }
    return bytes;
  }

  absl::Status Forward(const ForwardBatch& batch, PagedKvCache& kv,
                       std::vector<float>& logits) override;

 private:
  absl::Status ValidateAndReserve(const ForwardBatch& batch, PagedKvCache& kv);
  void RunLayer(int layer, const ForwardBatch& batch, const PagedKvCache& kv);
  void Attention(int layer, const ForwardBatch& batch, const PagedKvCache& kv);
  float* KeyAt(int layer, int64_t slot) {
    return k_store_.data() + (static_cast<size_t>(layer) * kv_cfg_.num_blocks * kv_cfg_.block_size +
                              static_cast<size_t>(slot)) * cfg_.kv_dim();
  }
  float* ValueAt(int layer, int64_t slot) {
    return v_store_.data() + (static_cast<size_t>(layer) * kv_cfg_.num_blocks * kv_cfg_.block_size +
                              static_cast<size_t>(slot)) * cfg_.kv_dim();
  }

  // Base GEMMs of layers sharing the input x in one parallel region, then the
  // predictive rows' LoRA deltas.
  struct TargetOutput {
    const TensorRef* w;
    LoraTarget target;
    float* y;
  };
  void Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, int64_t rows);

  const Model& model_;
  const LoraAdapter* adapter_;
  const ModelConfig& cfg_;
  KvCacheConfig kv_cfg_;
  cpu::ThreadPool pool_;
  std::vector<float> inv_freq_;  // head_dim/2
  std::vector<float> k_store_;   // [layer][slot][kv_dim]
  std::vector<float> v_store_;   // [layer][slot][kv_dim]

  // Per-forward scratch, rows x width.
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_;
  std::vector<float> cos_, sin_;  // rows x head_dim/2
  ForwardPlan plan_;                   // this forward's validated layout (engine/forward_plan.h)
  std::vector<int64_t> pred_rows_;     // indices of predictive rows (for the LoRA delta)
  std::vector<float> pred_k_, pred_v_; // rows x kv_dim: this layer's predictive K/V
};

absl::Status CpuBackend::ValidateAndReserve(const ForwardBatch& batch, PagedKvCache& kv) {
  absl::StatusOr<ForwardPlan> planned = PlanForward(batch, kv, cfg_, kv_cfg_);
  if (!planned.ok()) return planned.status();
  plan_ = *std::move(planned);
  pred_rows_.assign(plan_.predictive_rows.begin(), plan_.predictive_rows.end());
  return absl::OkStatus();
}

void CpuBackend::Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, int64_t rows) {
  cpu::LinearOutput base[3];
  int n = 0;
  for (const auto& o : outputs) base[n++] = {o.w, o.y};
  cpu::LinearShared(base, n, x, rows, pool_);
  if (adapter_ == nullptr || pred_rows_.empty()) return;
  for (const auto& o : outputs) {
    cpu::AddLoraDelta(adapter_->layers[static_cast<size_t>(layer)].at(o.target), o.w->cols(), o.w->rows(), x, o.y,
                      pred_rows_, pool_);
  }
}

absl::Status CpuBackend::Forward(const ForwardBatch& batch, PagedKvCache& kv,
                                 std::vector<float>& logits) {
  if (auto s = ValidateAndReserve(batch, kv); !s.ok()) return s;
  const int64_t rows = static_cast<int64_t>(batch.rows.size());
  const int64_t hidden = cfg_.hidden_size;
  const int half = cfg_.head_dim / 2;
  x_.resize(rows * hidden);
  xn_.resize(rows * hidden);
  q_.resize(rows * cfg_.q_dim());
  k_.resize(rows * cfg_.kv_dim());
  v_.resize(rows * cfg_.kv_dim());
  att_.resize(rows * cfg_.q_dim());
  proj_.resize(rows * hidden);
  gate_.resize(rows * cfg_.intermediate_size);
  up_.resize(rows * cfg_.intermediate_size);
  cos_.resize(rows * half);
  sin_.resize(rows * half);
  pred_k_.resize(rows * cfg_.kv_dim());
  pred_v_.resize(rows * cfg_.kv_dim());

  for (int64_t r = 0; r < rows; ++r) {
    const BatchRow& row = batch.rows[r];
    cpu::EmbeddingRow(model_.weights.tok_embeddings, row.token, x_.data() + r * hidden);
    for (int i = 0; i < half; ++i) {
      // Angle in float, as the reference implementations compute it.
      const float angle = static_cast<float>(row.position) * inv_freq_[i];
      cos_[r * half + i] = std::cos(angle);
      sin_[r * half + i] = std::sin(angle);
    }
  }

  for (int layer = 0; layer < cfg_.num_layers; ++layer) RunLayer(layer, batch, kv);

  // Output layer only for the rows that want logits.
  const int n_out = batch.num_logit_rows();
  logits.resize(static_cast<size_t>(n_out) * cfg_.vocab_size);
  if (n_out > 0) {
    int64_t j = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (!batch.rows[r].want_logits) continue;
      cpu::RmsNorm(x_.data() + r * hidden, static_cast<const float*>(model_.weights.final_norm.data),
                   hidden, cfg_.rms_norm_eps, xn_.data() + j * hidden);
      ++j;
    }
    cpu::Linear(model_.weights.output, xn_.data(), n_out, logits.data(), pool_);
  }

  // Commit: the control rows' K/V are now valid cache entries.
  for (const auto& [seq, count] : plan_.appended) {
    if (auto s = kv.Advance(seq, count); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void CpuBackend::RunLayer(int layer, const ForwardBatch& batch, const PagedKvCache& kv) {
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(layer)];
  const int64_t rows = static_cast<int64_t>(batch.rows.size());
  const int64_t hidden = cfg_.hidden_size;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int64_t ffn = cfg_.intermediate_size;
  const auto* attn_norm = static_cast<const float*>(w.attn_norm.data);
  const auto* ffn_norm = static_cast<const float*>(w.ffn_norm.data);

  // Attention block.
  for (int64_t r = 0; r < rows; ++r) {
    cpu::RmsNorm(x_.data() + r * hidden, attn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  }
  Linear({{&w.wq, LoraTarget::kQ, q_.data()}, {&w.wk, LoraTarget::kK, k_.data()}, {&w.wv, LoraTarget::kV, v_.data()}},
         layer, xn_.data(), rows);
  const int half = cfg_.head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    if (!w.bq.empty()) {
      cpu::AddInPlace(q_.data() + r * qd, static_cast<const float*>(w.bq.data), qd);
      cpu::AddInPlace(k_.data() + r * kvd, static_cast<const float*>(w.bk.data), kvd);
      cpu::AddInPlace(v_.data() + r * kvd, static_cast<const float*>(w.bv.data), kvd);
    }
    cpu::ApplyRope(q_.data() + r * qd, cfg_.num_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    cpu::ApplyRope(k_.data() + r * kvd, cfg_.num_kv_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    // Control rows append to the cache; predictive rows keep K/V for this layer only.
    const bool predictive = batch.rows[r].predictive;
    std::copy_n(k_.data() + r * kvd, kvd, predictive ? pred_k_.data() + r * kvd : KeyAt(layer, plan_.slots[static_cast<size_t>(r)]));
    std::copy_n(v_.data() + r * kvd, kvd, predictive ? pred_v_.data() + r * kvd : ValueAt(layer, plan_.slots[static_cast<size_t>(r)]));
  }
  Attention(layer, batch, kv);
  Linear({{&w.wo, LoraTarget::kO, proj_.data()}}, layer, att_.data(), rows);
  cpu::AddInPlace(x_.data(), proj_.data(), rows * hidden);

  // Feed-forward block (SwiGLU).
  for (int64_t r = 0; r < rows; ++r) {
    cpu::RmsNorm(x_.data() + r * hidden, ffn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  }
  Linear({{&w.w_gate, LoraTarget::kGate, gate_.data()}, {&w.w_up, LoraTarget::kUp, up_.data()}}, layer, xn_.data(),
         rows);
  cpu::SwiGlu(gate_.data(), up_.data(), rows * ffn);
  Linear({{&w.w_down, LoraTarget::kDown, proj_.data()}}, layer, gate_.data(), rows);
  cpu::AddInPlace(x_.data(), proj_.data(), rows * hidden);
}

// Each (row, head) attends its sequence's earlier positions: control rows read the
// paged cache up to their own position (this batch's control K/V is already in it);
// predictive rows read the cache below their group's first position, then their
// group's own K/V up to themselves.
void CpuBackend::Attention(int layer, const ForwardBatch& batch, const PagedKvCache& kv) {
  const int64_t rows = static_cast<int64_t>(batch.rows.size());
  const int heads = cfg_.num_heads;
  const int hd = cfg_.head_dim;
  const int group = cfg_.num_heads / cfg_.num_kv_heads;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int bs = kv_cfg_.block_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t work = rows * heads;
  int64_t total_cost = 0;  // multiply-adds, roughly: 2 · head_dim per attended position
  for (const BatchRow& row : batch.rows) total_cost += 2 * static_cast<int64_t>(hd) * heads * (row.position + 1);
  // Below ~64K multiply-adds a second thread costs more in synchronisation than it saves.
  const int64_t grain = total_cost < (1 << 16) ? work : 1;
  pool_.ParallelFor(work, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    thread_local std::vector<const float*> values;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / heads;
      const int h = static_cast<int>(task % heads);
      const BatchRow& row = batch.rows[r];
      const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
      const float* q = q_.data() + r * qd + static_cast<int64_t>(h) * hd;
      // Cached positions [0, n_cached), then (predictive only) the group's rows.
      const int64_t n_cached = plan_.num_cached[static_cast<size_t>(r)];
      const int64_t n_own = plan_.num_own[static_cast<size_t>(r)];
      const int64_t group_begin = plan_.group_begin[static_cast<size_t>(r)];
      const int64_t n = n_cached + n_own;
      scores.resize(static_cast<size_t>(n));
      values.resize(static_cast<size_t>(n));
      const auto& table = kv.block_table(row.seq);
      for (int64_t t = 0; t < n; ++t) {
        const float* key;
        if (t < n_cached) {
          const int64_t slot = int64_t{table[static_cast<size_t>(t / bs)]} * bs + t % bs;
          key = KeyAt(layer, slot) + kv_off;
          values[static_cast<size_t>(t)] = ValueAt(layer, slot) + kv_off;
        } else {
          const int64_t other = plan_.group_rows[static_cast<size_t>(group_begin + (t - n_cached))];
          key = pred_k_.data() + other * kvd + kv_off;
          values[static_cast<size_t>(t)] = pred_v_.data() + other * kvd + kv_off;
        }
        scores[static_cast<size_t>(t)] = cpu::Dot(q, key, hd) * scale;
      }
      cpu::Softmax(scores.data(), n);
      float* out = att_.data() + r * qd + static_cast<int64_t>(h) * hd;
      std::fill_n(out, hd, 0.0f);
      for (int64_t t = 0; t < n; ++t) {
        const float* value = values[static_cast<size_t>(t)];
        const float p = scores[static_cast<size_t>(t)];
        for (int d = 0; d < hd; ++d) out[d] += p * value[d];
      }
    }
  });
}

}  // namespace

int64_t KvBytesPerToken(const ModelConfig& config) {
  return int64_t{config.num_layers} * 2 * config.kv_dim() * static_cast<int64_t>(sizeof(float));
}

int64_t KvBlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes) {
  return bytes / (KvBytesPerToken(config) * block_size);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const Model& model,
                                                          const CpuBackendOptions& options) {
  if (auto s = model.config.Validate(); !s.ok()) return s;
  if (options.adapter != nullptr &&
      options.adapter->layers.size() != static_cast<size_t>(model.config.num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("CPU backend: the adapter has ", options.adapter->layers.size(),
                                                   " layers, the model ", model.config.num_layers));
  }
  if (options.kv.block_size <= 0 || options.kv.num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CPU backend: KV cache needs block_size > 0 and num_blocks > 0, got ",
                                                   options.kv.block_size, " and ", options.kv.num_blocks));
  }
  return std::unique_ptr<Backend>(new CpuBackend(model, options));
}

}  // namespace crossreg
