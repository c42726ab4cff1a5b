#include "tests/testing/tiny_models.h"

#include <vector>

#include "gtest/gtest.h"

namespace crossreg::testing {

ModelConfig TinyConfig(int vocab, int max_position) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position = max_position;
  return c;
}

EngineUnderTest MakeEngine(const Model& model, const LoraAdapter* adapter, int tokens, cpu::SimdLevel simd,
                           KvDtype kv_dtype, EngineThreading threading) {
  CpuBackendOptions options;
  options.simd = simd;
  options.kv_dtype = kv_dtype;
  options.num_threads = threading.threads;
  if (!threading.row_split) options.row_split_max_weight_bytes = 0;
  options.adapter = adapter;
  const int bs = threading.block_size;
  options.kv = {bs, (tokens + bs - 1) / bs};
  EngineUnderTest e;
  auto backend = CreateCpuBackend(model, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (backend.ok()) e.backend = std::move(*backend);
  e.kv = std::make_unique<PagedKvCache>(options.kv);
  e.env.model = &model.config;
  e.env.has_adapter = adapter != nullptr;
  e.env.placeholder_token = adapter != nullptr ? adapter->placeholder_token_id : 0;
  return e;
}

namespace {
TensorRef MergedCopy(Model& owner, const TensorRef& w, const LoraMatrix& m) {
  EXPECT_EQ(w.dtype, DType::kF32);
  auto buf = std::make_shared<std::vector<float>>(static_cast<const float*>(w.data),
                                                  static_cast<const float*>(w.data) + w.numel());
  const int64_t out = w.rows(), in = w.cols();
  if (m.present()) {
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) {
        double d = 0;
        for (int k = 0; k < m.rank; ++k) d += double(m.b[o * m.rank + k]) * m.a[k * in + i];
        (*buf)[static_cast<size_t>(o * in + i)] += static_cast<float>(m.scale * d);
      }
    }
  }
  TensorRef t = w;
  t.data = buf->data();
  owner.weights.storage.push_back(buf);
  return t;
}
}  // namespace

std::unique_ptr<LoraAdapter> TinyAdapter(const ModelConfig& config, float magnitude, uint64_t seed) {
  RandomLoraOptions options;
  options.magnitude = magnitude;
  options.seed = seed;
  options.placeholder_token_id = config.vocab_size - 1;
  return MakeRandomLoraAdapter(config, options);
}

std::unique_ptr<Model> MergeLora(const Model& model, const LoraAdapter& adapter) {
  auto merged = std::make_unique<Model>();
  merged->config = model.config;
  merged->weights = model.weights;  // views; the linear ones are replaced below
  for (size_t l = 0; l < merged->weights.layers.size(); ++l) {
    LayerWeights& w = merged->weights.layers[l];
    const LoraLayer& a = adapter.layers[l];
    w.wq = MergedCopy(*merged, w.wq, a.at(LoraTarget::kQ));
    w.wk = MergedCopy(*merged, w.wk, a.at(LoraTarget::kK));
    w.wv = MergedCopy(*merged, w.wv, a.at(LoraTarget::kV));
    w.wo = MergedCopy(*merged, w.wo, a.at(LoraTarget::kO));
    w.w_gate = MergedCopy(*merged, w.w_gate, a.at(LoraTarget::kGate));
    w.w_up = MergedCopy(*merged, w.w_up, a.at(LoraTarget::kUp));
    w.w_down = MergedCopy(*merged, w.w_down, a.at(LoraTarget::kDown));
  }
  return merged;
}

}  // namespace crossreg::testing
