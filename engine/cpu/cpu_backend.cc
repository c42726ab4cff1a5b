#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/lora_delta.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"

namespace crossreg {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const CpuBackendOptions& options)
      : Backend(model.config, options.kv),
        model_(model),
        adapter_(options.adapter),
        cfg_(model.config),
        kv_cfg_(options.kv),
        kv_dtype_(options.kv_dtype),
        simd_(cpu::ClampSimdLevel(options.simd)),
        pool_(options.num_threads),
        inv_freq_(cfg_.RopeInverseFrequencies()) {
    const size_t per_layer = LayerSlots() * static_cast<size_t>(cfg_.kv_dim()) * ElementBytes();
    k_store_.assign(per_layer * cfg_.num_layers, 0);
    v_store_.assign(per_layer * cfg_.num_layers, 0);
    PackWeights();
  }

  std::string_view name() const override { return "cpu"; }
  std::string device() const override {
    return absl::StrCat(cpu::CpuModelName(), ", ", pool_.num_threads(), " threads, SIMD ", cpu::SimdLevelName(simd_),
                        ", KV ", KvDtypeName(kv_dtype_));
  }

  int64_t WeightBytesPerForward() const override {
    int64_t bytes = output_.bytes();
    for (const auto& l : layers_) {
      for (const cpu::PackedWeights* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        bytes += w->bytes();
      }
    }
    return bytes;
  }

 protected:
  absl::Status Compute(const ForwardPlan& plan, std::vector<float>& logits) override;

 private:
  size_t LayerSlots() const { return static_cast<size_t>(kv_cfg_.num_blocks) * kv_cfg_.block_size; }
  size_t ElementBytes() const { return kv_dtype_ == KvDtype::kF32 ? 4 : 2; }
  unsigned char* KeyAt(int layer, int64_t slot) {
    return k_store_.data() +
           (static_cast<size_t>(layer) * LayerSlots() + static_cast<size_t>(slot)) * cfg_.kv_dim() * ElementBytes();
  }
  unsigned char* ValueAt(int layer, int64_t slot) {
    return v_store_.data() +
           (static_cast<size_t>(layer) * LayerSlots() + static_cast<size_t>(slot)) * cfg_.kv_dim() * ElementBytes();
  }
  // One row's K or V into the cache, in lanes within each block
  // (cpu::KvLayout::kBlockTransposed): element (kv_head, d) of a block's positions is
  // contiguous, so attention covers 16 positions per vector op.
  void StoreTransposed(const float* src, unsigned char* layer_base, int64_t slot) {
    const int64_t bs = kv_cfg_.block_size, hd = cfg_.head_dim, kvh = cfg_.num_kv_heads;
    const int64_t base = (slot / bs) * kvh * hd * bs + slot % bs;
    for (int64_t i = 0; i < kvh * hd; ++i) {  // i = kv_head * hd + d
      const int64_t at = base + i * bs;
      if (kv_dtype_ == KvDtype::kF32) {
        reinterpret_cast<float*>(layer_base)[at] = src[i];
      } else {
        reinterpret_cast<uint16_t*>(layer_base)[at] = F32ToBf16(src[i]);
      }
    }
  }
  // Runs fn(row) for every row: across the pool's threads when there is enough work
  // (rows x width elements), else here. Per-row ops never mix rows, so the split does
  // not change any result.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t width, Fn fn) {
    if (rows * width < (int64_t{1} << 15) || pool_.num_threads() == 1) {
      for (int64_t r = 0; r < rows; ++r) fn(r);
      return;
    }
    pool_.ParallelFor(rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) fn(r);
    });
  }
  // Every linear weight (and the adapter's A and B) into the kernels' panel layout.
  void PackWeights();
  void RunLayer(int layer, const ForwardPlan& plan);
  void Attention(int layer, const ForwardPlan& plan);

  // Base GEMMs of layers sharing the input x in one parallel region, then the
  // predictive rows' LoRA deltas.
  struct TargetOutput {
    const cpu::PackedWeights* w;
    LoraTarget target;
    float* y;
  };
  struct PackedLayer {
    cpu::PackedWeights wq, wk, wv, wo, w_gate, w_up, w_down;
    std::array<cpu::PackedLoraMatrix, kNumLoraTargets> lora;  // empty without an adapter
  };
  void Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, int64_t rows);

  const Model& model_;
  const LoraAdapter* adapter_;
  const ModelConfig& cfg_;
  KvCacheConfig kv_cfg_;
  KvDtype kv_dtype_;
  cpu::SimdLevel simd_;
  cpu::ThreadPool pool_;
  std::vector<PackedLayer> layers_;
  cpu::PackedWeights output_;
  std::vector<float> inv_freq_;  // head_dim/2
  std::vector<unsigned char> k_store_;  // [layer][slot][kv_dim], f32 or bf16 elements
  std::vector<unsigned char> v_store_;

  // Per-forward scratch, rows x width.
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_;
  std::vector<float> cos_, sin_;       // rows x head_dim/2
  std::vector<int64_t> pred_rows_;     // indices of predictive rows (for the LoRA delta)
  std::vector<float> pred_k_, pred_v_; // rows x kv_dim: this layer's predictive K/V
};

void CpuBackend::PackWeights() {
  layers_.resize(static_cast<size_t>(cfg_.num_layers));
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
    PackedLayer& p = layers_[static_cast<size_t>(l)];
    const std::pair<cpu::PackedWeights*, const TensorRef*> linears[] = {
        {&p.wq, &w.wq}, {&p.wk, &w.wk}, {&p.wv, &w.wv}, {&p.wo, &w.wo},
        {&p.w_gate, &w.w_gate}, {&p.w_up, &w.w_up}, {&p.w_down, &w.w_down}};
    for (const auto& [packed, tensor] : linears) *packed = cpu::PackedWeights::Pack(*tensor, &pool_);
    if (adapter_ == nullptr) continue;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto target = static_cast<LoraTarget>(t);
      p.lora[static_cast<size_t>(t)] =
          cpu::PackedLoraMatrix::Pack(adapter_->layers[static_cast<size_t>(l)].at(target),
                                      LoraInFeatures(cfg_, target), LoraOutFeatures(cfg_, target));
    }
  }
  output_ = cpu::PackedWeights::Pack(model_.weights.output, &pool_);
}

void CpuBackend::Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, int64_t rows) {
  cpu::LinearOutput base[3];
  int n = 0;
  for (const auto& o : outputs) base[n++] = {o.w, o.y};
  cpu::LinearShared(base, n, x, rows, pool_, simd_);
  if (adapter_ == nullptr || pred_rows_.empty()) return;
  for (const auto& o : outputs) {
    cpu::AddLoraDelta(layers_[static_cast<size_t>(layer)].lora[static_cast<size_t>(o.target)], x, o.y, pred_rows_,
                      pool_, simd_);
  }
}

absl::Status CpuBackend::Compute(const ForwardPlan& plan, std::vector<float>& logits) {
  const int64_t rows = plan.rows;
  const int64_t hidden = cfg_.hidden_size;
  const int half = cfg_.head_dim / 2;
  pred_rows_.assign(plan.predictive_rows.begin(), plan.predictive_rows.end());
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

  ForRows(rows, hidden, [&](int64_t r) {
    cpu::EmbeddingRow(model_.weights.tok_embeddings, plan.tokens[static_cast<size_t>(r)], x_.data() + r * hidden);
    for (int i = 0; i < half; ++i) {
      // Angle in float, as the reference implementations compute it.
      const float angle = static_cast<float>(plan.positions[static_cast<size_t>(r)]) * inv_freq_[i];
      cos_[r * half + i] = std::cos(angle);
      sin_[r * half + i] = std::sin(angle);
    }
  });

  for (int layer = 0; layer < cfg_.num_layers; ++layer) RunLayer(layer, plan);

  // Output layer only for the rows that want logits.
  const int64_t n_out = static_cast<int64_t>(plan.logit_rows.size());
  logits.resize(static_cast<size_t>(n_out) * cfg_.vocab_size);
  if (n_out > 0) {
    for (int64_t j = 0; j < n_out; ++j) {
      const int64_t r = plan.logit_rows[static_cast<size_t>(j)];
      cpu::RmsNorm(x_.data() + r * hidden, static_cast<const float*>(model_.weights.final_norm.data), hidden,
                   cfg_.rms_norm_eps, xn_.data() + j * hidden);
    }
    cpu::Linear(output_, xn_.data(), n_out, logits.data(), pool_, simd_);
  }
  return absl::OkStatus();
}

void CpuBackend::RunLayer(int layer, const ForwardPlan& plan) {
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(layer)];
  const PackedLayer& pw = layers_[static_cast<size_t>(layer)];
  const int64_t rows = plan.rows;
  const int64_t hidden = cfg_.hidden_size;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int64_t ffn = cfg_.intermediate_size;
  const auto* attn_norm = static_cast<const float*>(w.attn_norm.data);
  const auto* ffn_norm = static_cast<const float*>(w.ffn_norm.data);

  // Attention block.
  ForRows(rows, hidden, [&](int64_t r) {
    cpu::RmsNorm(x_.data() + r * hidden, attn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  });
  Linear({{&pw.wq, LoraTarget::kQ, q_.data()}, {&pw.wk, LoraTarget::kK, k_.data()},
          {&pw.wv, LoraTarget::kV, v_.data()}},
         layer, xn_.data(), rows);
  const int half = cfg_.head_dim / 2;
  ForRows(rows, qd, [&](int64_t r) {
    if (!w.bq.empty()) {
      cpu::AddInPlace(q_.data() + r * qd, static_cast<const float*>(w.bq.data), qd);
      cpu::AddInPlace(k_.data() + r * kvd, static_cast<const float*>(w.bk.data), kvd);
      cpu::AddInPlace(v_.data() + r * kvd, static_cast<const float*>(w.bv.data), kvd);
    }
    cpu::ApplyRope(q_.data() + r * qd, cfg_.num_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    cpu::ApplyRope(k_.data() + r * kvd, cfg_.num_kv_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    // Control rows append to the cache before attention, so a row sees the earlier
    // rows of its own sequence in this batch; predictive rows keep K/V for this layer only.
    if (plan.predictive(static_cast<int>(r))) {
      std::copy_n(k_.data() + r * kvd, kvd, pred_k_.data() + r * kvd);
      std::copy_n(v_.data() + r * kvd, kvd, pred_v_.data() + r * kvd);
    } else {
      const int64_t slot = plan.slots[static_cast<size_t>(r)];
      StoreTransposed(k_.data() + r * kvd, KeyAt(layer, 0), slot);
      StoreTransposed(v_.data() + r * kvd, ValueAt(layer, 0), slot);
    }
  });
  Attention(layer, plan);
  Linear({{&pw.wo, LoraTarget::kO, proj_.data()}}, layer, att_.data(), rows);
  ForRows(rows, hidden, [&](int64_t r) {
    cpu::AddInPlace(x_.data() + r * hidden, proj_.data() + r * hidden, hidden);
    cpu::RmsNorm(x_.data() + r * hidden, ffn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  });

  // Feed-forward block (SwiGLU).
  Linear({{&pw.w_gate, LoraTarget::kGate, gate_.data()}, {&pw.w_up, LoraTarget::kUp, up_.data()}}, layer,
         xn_.data(), rows);
  ForRows(rows, ffn, [&](int64_t r) { cpu::SwiGlu(gate_.data() + r * ffn, up_.data() + r * ffn, ffn); });
  Linear({{&pw.w_down, LoraTarget::kDown, proj_.data()}}, layer, gate_.data(), rows);
  ForRows(rows, hidden, [&](int64_t r) {
    cpu::AddInPlace(x_.data() + r * hidden, proj_.data() + r * hidden, hidden);
  });
}

void CpuBackend::Attention(int layer, const ForwardPlan& plan) {
  cpu::PagedAttentionArgs a;
  a.q = q_.data();
  a.q_stride = cfg_.q_dim();
  a.cache_element = kv_dtype_ == KvDtype::kBf16 ? cpu::KvElement::kBf16 : cpu::KvElement::kF32;
  a.kv_layout = cpu::KvLayout::kBlockTransposed;
  a.k_cache = KeyAt(layer, 0);
  a.v_cache = ValueAt(layer, 0);
  a.pred_k = pred_k_.data();
  a.pred_v = pred_v_.data();
  a.block_tables = plan.block_tables.data();
  a.table_offset = plan.table_offset.data();
  a.num_cached = plan.num_cached.data();
  a.num_own = plan.num_own.data();
  a.group_begin = plan.group_begin.data();
  a.group_rows = plan.group_rows.data();
  a.rows = plan.rows;
  a.num_heads = cfg_.num_heads;
  a.num_kv_heads = cfg_.num_kv_heads;
  a.head_dim = cfg_.head_dim;
  a.block_size = kv_cfg_.block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim));
  a.out = att_.data();
  a.out_stride = cfg_.q_dim();
  cpu::PagedAttention(a, &pool_);
}

}  // namespace

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
