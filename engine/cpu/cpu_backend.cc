#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cpu/bf16_panel_kernel.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kv_store.h"
#include "engine/cpu/large_buffer.h"
#include "engine/cpu/linear.h"
#include "engine/cpu/lora_delta.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/packed_weights.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

// The adapter's matrices over a quantized base stay floating point (bf16 panels: the
// drafts may move in the last bits, the verified output never does); over a float base
// they take its format.
cpu::PanelFormat LoraPanelFormat(cpu::PanelFormat base) {
  return base == cpu::PanelFormat::kQ8 ? cpu::PanelFormat::kBf16 : base;
}

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
        row_split_max_weight_bytes_(options.row_split_max_weight_bytes),
        inv_freq_(cfg_.RopeInverseFrequencies()) {
    const size_t per_layer = LayerSlots() * static_cast<size_t>(cfg_.kv_dim()) * ElementBytes();
    k_store_ = cpu::LargeBuffer(per_layer * cfg_.num_layers);
    v_store_ = cpu::LargeBuffer(per_layer * cfg_.num_layers);
    PackWeights();
    weight_bytes_ = WeightBytesPerForward();
  }

  std::string_view name() const override { return "cpu"; }
  std::string device() const override {
    return absl::StrCat(cpu::CpuModelName(), ", ", pool_.num_threads(), " threads, SIMD ", cpu::SimdLevelName(simd_),
                        simd_ >= cpu::SimdLevel::kAvx512
                            ? absl::StrCat(" (bf16 weights: ",
                                           cpu::Bf16PanelKernelName(cpu::Bf16PanelKernelAt(simd_)), ")")
                            : std::string(),
                        HasQuantizedWeights()
                            ? absl::StrCat(", quantized weights: ", cpu::QuantKernelName(simd_))
                            : std::string(),
                        ", KV ", KvDtypeName(kv_dtype_));
  }

  bool HasQuantizedWeights() const {
    if (output_.format() == cpu::PanelFormat::kQ8) return true;
    for (const auto& l : layers_) {
      for (const cpu::PackedWeights* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        if (w->format() == cpu::PanelFormat::kQ8) return true;
      }
    }
    return false;
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
  absl::Status Compute(const ForwardPlan& plan, ForwardOutput& out) override;

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
  // The rows one thread computes, and the pool its ops may use: every row with the
  // backend's pool, or (row-split forward) one thread's share with a pool of one.
  struct RowSlice {
    int64_t begin = 0, end = 0;
    cpu::ThreadPool* pool = nullptr;
    cpu::SpinBarrier* barrier = nullptr;  // row-split: the other threads, met around each K/V store
    int thread = 0, threads = 1;          // row-split: this thread's index among them
    std::vector<int64_t> pred_rows;  // its predictive rows (indices into its rows: row begin + i)
    int64_t rows() const { return end - begin; }
  };
  // Elements [i_begin, i_end) of every control row's K and V (this layer's) into the
  // cache at the rows' slots (engine/cpu/kv_store.h).
  void StoreKv(int layer, const ForwardPlan& plan, int64_t i_begin, int64_t i_end) {
    cpu::KvStoreArgs a{.src = k_.data(), .src_stride = cfg_.kv_dim(), .slots = plan.slots.data(), .rows = plan.rows,
                       .width = cfg_.kv_dim(), .block_size = kv_cfg_.block_size,
                       .bf16 = kv_dtype_ == KvDtype::kBf16, .cache = KeyAt(layer, 0)};
    cpu::StoreKvRows(a, i_begin, i_end, simd_);
    a.src = v_.data();
    a.cache = ValueAt(layer, 0);
    a.value_rows = true;
    a.head_dim = cfg_.head_dim;
    cpu::StoreKvRows(a, i_begin, i_end, simd_);
  }
  // Share t of `parts` of the elements, in whole vectors of 16.
  std::pair<int64_t, int64_t> ElementShare(int t, int parts) const {
    const int64_t width = cfg_.kv_dim();
    const int64_t vectors = (width + 15) / 16;
    return {std::min(width, vectors * t / parts * 16), std::min(width, vectors * (t + 1) / parts * 16)};
  }
  // Row elements of K/V from which a store is split between the threads: below it the
  // parallel region (~1.5 µs) costs more than the store.
  static constexpr int64_t kParallelStoreElements = int64_t{1} << 13;
  // Runs fn(row) for every row of the slice: across the pool's threads when there is
  // enough work (rows x width elements: from 6 rows of the ~110M model's 768), else here.
  // Splitting that early pays less for the op itself than for what follows: the linear
  // layers' row tiles are packed by the thread that wrote their rows (engine/cpu/linear.cc).
  // Per-row ops never mix rows, so the split does not change any result.
  template <typename Fn>
  void ForRows(const RowSlice& s, int64_t width, Fn fn) {
    if (s.rows() * width < (int64_t{1} << 12) || s.pool->num_threads() == 1) {
      for (int64_t r = s.begin; r < s.end; ++r) fn(r);
      return;
    }
    s.pool->ParallelFor(s.rows(), 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) fn(s.begin + r);
    });
  }
  // Whether this forward's rows are split between the threads, each running every
  // layer on its share (meeting around each layer's K/V store), instead of splitting
  // each op. Small models gain from a few rows a thread on: their per-op parallel
  // regions and cross-core hand-offs cost more than the forward's math. A large model
  // loses with few rows a thread (each core streams every weight for its few rows) and
  // gains only with many, where the hand-offs outweigh the second read of each weight
  // (the cores run the same layer at once, so it mostly hits the shared L3). The
  // thresholds below were timed with `crossreg-bench-decode --rows 8,16,24,32,48,64` on
  // stories260K, the default model and the ~110M model (docs/benchmarks.md, "The
  // programs"). Prefill-sized forwards stay per op: their rows' attention grows along
  // the prompt, and the per-op path balances it.
  bool SplitRows(int64_t rows) const {
    if (pool_.num_threads() == 1 || row_split_max_weight_bytes_ <= 0) return false;
    const int64_t per_thread = rows / pool_.num_threads();
    if (weight_bytes_ <= (int64_t{4} << 20)) return per_thread >= 4;
    if (weight_bytes_ <= row_split_max_weight_bytes_) return per_thread >= 8;
    return per_thread >= 24 && per_thread <= 64;
  }
  // Every linear weight (and the adapter's A and B) into the kernels' panel layout.
  void PackWeights();
  void Embed(const ForwardPlan& plan, const RowSlice& s);
  void RunLayer(int layer, const ForwardPlan& plan, const RowSlice& s);
  void Attention(int layer, const ForwardPlan& plan, const RowSlice& s);
  // Final norm and output layer for logit rows [j0, j1) (plan.logit_rows indices).
  void Logits(const ForwardPlan& plan, int64_t j0, int64_t j1, cpu::ThreadPool& pool, std::vector<float>& logits);
  void ComputeRowSplit(const ForwardPlan& plan, std::vector<float>& logits);
  // Every row of plan.logit_rows, full, into `logits`.
  absl::Status ComputeLogits(const ForwardPlan& plan, std::vector<float>& logits);

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
    const cpu::PackedWeights& Base(LoraTarget t) const {
      switch (t) {
        case LoraTarget::kQ: return wq;
        case LoraTarget::kK: return wk;
        case LoraTarget::kV: return wv;
        case LoraTarget::kO: return wo;
        case LoraTarget::kGate: return w_gate;
        case LoraTarget::kUp: return w_up;
        case LoraTarget::kDown: return w_down;
      }
      return wq;
    }
  };
  void Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, const RowSlice& s);

  const Model& model_;
  const LoraAdapter* adapter_;
  const ModelConfig& cfg_;
  KvCacheConfig kv_cfg_;
  KvDtype kv_dtype_;
  cpu::SimdLevel simd_;
  cpu::ThreadPool pool_;
  cpu::ThreadPool serial_{1};  // the ops of one thread's rows in a row-split forward
  int64_t row_split_max_weight_bytes_;
  int64_t weight_bytes_ = 0;
  // Declared before the weights packed into it: destroyed after them.
  std::unique_ptr<cpu::WeightArena> weight_arena_;
  std::vector<PackedLayer> layers_;
  cpu::PackedWeights output_;
  std::vector<float> inv_freq_;  // head_dim/2
  // Per layer, num_blocks blocks of block_size slots x kv_dim elements (f32 or bf16),
  // keys and values each in their layout within a block (engine/cpu/kv_store.h).
  // Zeroed at start-up, on huge pages where the kernel grants them (large_buffer.h).
  cpu::LargeBuffer k_store_;
  cpu::LargeBuffer v_store_;

  // Per-forward scratch, rows x width.
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_;
  std::vector<float> final_norm_;      // logit rows x hidden
  std::vector<float> dense_logits_;    // every logit row, when some return summaries
  std::vector<float> cos_, sin_;       // rows x head_dim/2
  // 2 x rows x kv_dim: predictive K/V, half (layer % 2): in a row-split forward one
  // thread may write layer l + 1's while another still reads layer l's.
  std::vector<float> pred_k_, pred_v_;
  float* PredK(int layer, int64_t rows) { return pred_k_.data() + (layer % 2) * rows * cfg_.kv_dim(); }
  float* PredV(int layer, int64_t rows) { return pred_v_.data() + (layer % 2) * rows * cfg_.kv_dim(); }
};

void CpuBackend::PackWeights() {
  // Every matrix in one arena, in the order a forward reads them (large_buffer.h: on
  // huge pages, the weight stream's page walks all but vanish).
  size_t arena_bytes = cpu::PackedWeights::PackedBytes(model_.weights.output) + 128;
  for (const LayerWeights& w : model_.weights.layers) {
    for (const TensorRef* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      arena_bytes += cpu::PackedWeights::PackedBytes(*t) + 128;
    }
  }
  weight_arena_ = std::make_unique<cpu::WeightArena>(arena_bytes);
  layers_.resize(static_cast<size_t>(cfg_.num_layers));
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
    PackedLayer& p = layers_[static_cast<size_t>(l)];
    const std::pair<cpu::PackedWeights*, const TensorRef*> linears[] = {
        {&p.wq, &w.wq}, {&p.wk, &w.wk}, {&p.wv, &w.wv}, {&p.wo, &w.wo},
        {&p.w_gate, &w.w_gate}, {&p.w_up, &w.w_up}, {&p.w_down, &w.w_down}};
    for (const auto& [packed, tensor] : linears) {
      *packed = cpu::PackedWeights::Pack(*tensor, &pool_, weight_arena_.get());
    }
    if (adapter_ == nullptr) continue;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto target = static_cast<LoraTarget>(t);
      p.lora[static_cast<size_t>(t)] = cpu::PackedLoraMatrix::Pack(
          adapter_->layers[static_cast<size_t>(l)].at(target), LoraInFeatures(cfg_, target),
          LoraOutFeatures(cfg_, target), LoraPanelFormat(p.Base(target).format()));
    }
  }
  output_ = cpu::PackedWeights::Pack(model_.weights.output, &pool_, weight_arena_.get());
}

void CpuBackend::Linear(std::initializer_list<TargetOutput> outputs, int layer, const float* x, const RowSlice& s) {
  cpu::LinearOutput base[cpu::kMaxLoraGroup];
  const cpu::PackedLoraMatrix* lora[cpu::kMaxLoraGroup];
  int n = 0;
  for (const auto& o : outputs) {
    lora[n] = adapter_ != nullptr ? &layers_[static_cast<size_t>(layer)].lora[static_cast<size_t>(o.target)] : nullptr;
    base[n++] = {o.w, o.y + s.begin * o.w->out()};
  }
  cpu::LinearWithLora(base, lora, n, x + s.begin * outputs.begin()->w->in(), s.rows(), s.pred_rows, *s.pool, simd_);
}

absl::Status CpuBackend::Compute(const ForwardPlan& plan, ForwardOutput& out) {
  // The CPU computes every logit row anyway; summary rows are reduced from them by the
  // reference reduction (the argmax Verify would otherwise take).
  if (plan.summary_rows.empty()) {
    out.summaries.clear();
    return ComputeLogits(plan, out.logits);
  }
  RETURN_IF_ERROR(ComputeLogits(plan, dense_logits_));
  SplitLogitRows(plan, dense_logits_, static_cast<int>(cfg_.vocab_size), out);
  return absl::OkStatus();
}

absl::Status CpuBackend::ComputeLogits(const ForwardPlan& plan, std::vector<float>& logits) {
  const int64_t rows = plan.rows;
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
  pred_k_.resize(2 * rows * cfg_.kv_dim());
  pred_v_.resize(2 * rows * cfg_.kv_dim());
  logits.resize(plan.logit_rows.size() * static_cast<size_t>(cfg_.vocab_size));
  final_norm_.resize(plan.logit_rows.size() * static_cast<size_t>(hidden));
  if (SplitRows(rows)) {
    ComputeRowSplit(plan, logits);
    return absl::OkStatus();
  }
  RowSlice all{.begin = 0, .end = rows, .pool = &pool_, .barrier = nullptr,
               .pred_rows = {plan.predictive_rows.begin(), plan.predictive_rows.end()}};
  Embed(plan, all);
  for (int layer = 0; layer < cfg_.num_layers; ++layer) RunLayer(layer, plan, all);
  Logits(plan, 0, static_cast<int64_t>(plan.logit_rows.size()), pool_, logits);
  return absl::OkStatus();
}

void CpuBackend::ComputeRowSplit(const ForwardPlan& plan, std::vector<float>& logits) {
  const int threads = pool_.num_threads();
  cpu::SpinBarrier barrier(threads);
  pool_.ParallelFor(threads, 1, [&](int64_t t, int64_t) {
    RowSlice s{.begin = plan.rows * t / threads, .end = plan.rows * (t + 1) / threads, .pool = &serial_,
               .barrier = &barrier, .thread = static_cast<int>(t), .threads = threads, .pred_rows = {}};
    for (int32_t r : plan.predictive_rows) {
      if (r >= s.begin && r < s.end) s.pred_rows.push_back(r - s.begin);
    }
    Embed(plan, s);
    for (int layer = 0; layer < cfg_.num_layers; ++layer) RunLayer(layer, plan, s);
    // This thread's rows are final; logit_rows ascend, so its logit rows are one range.
    const auto first = std::lower_bound(plan.logit_rows.begin(), plan.logit_rows.end(), s.begin);
    const auto last = std::lower_bound(plan.logit_rows.begin(), plan.logit_rows.end(), s.end);
    Logits(plan, first - plan.logit_rows.begin(), last - plan.logit_rows.begin(), serial_, logits);
  });
}

void CpuBackend::Embed(const ForwardPlan& plan, const RowSlice& s) {
  const int64_t hidden = cfg_.hidden_size;
  const int half = cfg_.head_dim / 2;
  ForRows(s, hidden, [&](int64_t r) {
    cpu::EmbeddingRow(model_.weights.tok_embeddings, plan.tokens[static_cast<size_t>(r)], x_.data() + r * hidden);
    for (int i = 0; i < half; ++i) {
      // Angle in float, as the reference implementations compute it.
      const float angle = static_cast<float>(plan.positions[static_cast<size_t>(r)]) * inv_freq_[i];
      cos_[r * half + i] = std::cos(angle);
      sin_[r * half + i] = std::sin(angle);
    }
  });
}

void CpuBackend::Logits(const ForwardPlan& plan, int64_t j0, int64_t j1, cpu::ThreadPool& pool,
                        std::vector<float>& logits) {
  if (j0 >= j1) return;
  const int64_t hidden = cfg_.hidden_size;
  // Its own buffer: in a row-split forward another thread may still be using xn_.
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t r = plan.logit_rows[static_cast<size_t>(j)];
    cpu::RmsNorm(x_.data() + r * hidden, static_cast<const float*>(model_.weights.final_norm.data), hidden,
                 cfg_.rms_norm_eps, final_norm_.data() + j * hidden);
  }
  cpu::Linear(output_, final_norm_.data() + j0 * hidden, j1 - j0, logits.data() + j0 * cfg_.vocab_size, pool, simd_);
}

void CpuBackend::RunLayer(int layer, const ForwardPlan& plan, const RowSlice& s) {
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(layer)];
  const PackedLayer& pw = layers_[static_cast<size_t>(layer)];
  const int64_t hidden = cfg_.hidden_size;
  const int64_t qd = cfg_.q_dim();
  const int64_t kvd = cfg_.kv_dim();
  const int64_t ffn = cfg_.intermediate_size;
  const auto* attn_norm = static_cast<const float*>(w.attn_norm.data);
  const auto* ffn_norm = static_cast<const float*>(w.ffn_norm.data);
  float* pred_k = PredK(layer, plan.rows);
  float* pred_v = PredV(layer, plan.rows);

  // Attention block.
  ForRows(s, hidden, [&](int64_t r) {
    cpu::RmsNorm(x_.data() + r * hidden, attn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  });
  Linear({{&pw.wq, LoraTarget::kQ, q_.data()}, {&pw.wk, LoraTarget::kK, k_.data()},
          {&pw.wv, LoraTarget::kV, v_.data()}},
         layer, xn_.data(), s);
  const int half = cfg_.head_dim / 2;
  ForRows(s, qd, [&](int64_t r) {
    if (!w.bq.empty()) {
      cpu::AddInPlace(q_.data() + r * qd, static_cast<const float*>(w.bq.data), qd);
      cpu::AddInPlace(k_.data() + r * kvd, static_cast<const float*>(w.bk.data), kvd);
      cpu::AddInPlace(v_.data() + r * kvd, static_cast<const float*>(w.bv.data), kvd);
    }
    cpu::ApplyRope(q_.data() + r * qd, cfg_.num_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    cpu::ApplyRope(k_.data() + r * kvd, cfg_.num_kv_heads, cfg_.head_dim, cos_.data() + r * half,
                   sin_.data() + r * half);
    // Predictive rows keep K/V for this layer only; control rows go to the cache below.
    if (plan.predictive(static_cast<int>(r))) {
      std::copy_n(k_.data() + r * kvd, kvd, pred_k + r * kvd);
      std::copy_n(v_.data() + r * kvd, kvd, pred_v + r * kvd);
    }
  });
  // Control rows append to the cache before attention, so a row sees the earlier rows
  // of its own sequence in this batch. Keys in lanes put neighbouring slots in one
  // cache line, so the threads split the store by elements (lines), never by rows.
  if (s.barrier != nullptr) {
    // Row-split: every row's K/V must be computed before any is stored, and stored
    // before any row attends.
    s.barrier->Wait();
    const auto [i0, i1] = ElementShare(s.thread, s.threads);
    StoreKv(layer, plan, i0, i1);
    s.barrier->Wait();
  } else if (s.rows() * kvd >= kParallelStoreElements && s.pool->num_threads() > 1) {
    const int parts = s.pool->num_threads();
    s.pool->ParallelFor(parts, 1, [&](int64_t t, int64_t) {
      const auto [i0, i1] = ElementShare(static_cast<int>(t), parts);
      StoreKv(layer, plan, i0, i1);
    });
  } else {
    StoreKv(layer, plan, 0, kvd);
  }
  Attention(layer, plan, s);
  Linear({{&pw.wo, LoraTarget::kO, proj_.data()}}, layer, att_.data(), s);
  ForRows(s, hidden, [&](int64_t r) {
    cpu::AddInPlace(x_.data() + r * hidden, proj_.data() + r * hidden, hidden);
    cpu::RmsNorm(x_.data() + r * hidden, ffn_norm, hidden, cfg_.rms_norm_eps, xn_.data() + r * hidden);
  });

  // Feed-forward block (SwiGLU).
  Linear({{&pw.w_gate, LoraTarget::kGate, gate_.data()}, {&pw.w_up, LoraTarget::kUp, up_.data()}}, layer,
         xn_.data(), s);
  ForRows(s, ffn, [&](int64_t r) { cpu::SwiGlu(gate_.data() + r * ffn, up_.data() + r * ffn, ffn); });
  Linear({{&pw.w_down, LoraTarget::kDown, proj_.data()}}, layer, gate_.data(), s);
  ForRows(s, hidden, [&](int64_t r) {
    cpu::AddInPlace(x_.data() + r * hidden, proj_.data() + r * hidden, hidden);
  });
}

void CpuBackend::Attention(int layer, const ForwardPlan& plan, const RowSlice& s) {
  // The slice's rows: per-row arrays start at s.begin; the predictive K/V and the
  // group lists keep whole-batch row indices.
  cpu::PagedAttentionArgs a;
  a.q = q_.data() + s.begin * cfg_.q_dim();
  a.q_stride = cfg_.q_dim();
  a.cache_element = kv_dtype_ == KvDtype::kBf16 ? cpu::KvElement::kBf16 : cpu::KvElement::kF32;
  a.kv_layout = cpu::KvLayout::kBlockTransposed;
  a.k_cache = KeyAt(layer, 0);
  a.v_cache = ValueAt(layer, 0);
  a.pred_k = PredK(layer, plan.rows);
  a.pred_v = PredV(layer, plan.rows);
  a.block_tables = plan.block_tables.data();
  a.table_offset = plan.table_offset.data() + s.begin;
  a.num_cached = plan.num_cached.data() + s.begin;
  a.num_own = plan.num_own.data() + s.begin;
  a.group_begin = plan.group_begin.data() + s.begin;
  a.group_rows = plan.group_rows.data();
  a.rows = static_cast<int>(s.rows());
  a.num_heads = cfg_.num_heads;
  a.num_kv_heads = cfg_.num_kv_heads;
  a.head_dim = cfg_.head_dim;
  a.block_size = kv_cfg_.block_size;
  a.scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim));
  a.out = att_.data() + s.begin * cfg_.q_dim();
  a.out_stride = cfg_.q_dim();
  cpu::PagedAttention(a, s.pool->num_threads() > 1 ? s.pool : nullptr);
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
