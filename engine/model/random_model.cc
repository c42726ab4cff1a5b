#include "engine/model/random_model.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "engine/quant/ggml_blocks.h"
#include "engine/sampler.h"

namespace crossreg {
namespace {

class WeightFactory {
 public:
  WeightFactory(Model& model, const RandomModelOptions& options)
      : model_(model), options_(options), rng_(options.seed) {}

  TensorRef Matrix(int64_t rows, int64_t cols) { return Matrix(rows, cols, options_.dtype); }
  TensorRef Matrix(int64_t rows, int64_t cols, DType dtype) {
    const float bound = options_.scale / std::sqrt(static_cast<float>(cols));
    return Fill({rows, cols}, dtype, [&] { return bound * Symmetric(); });
  }
  // Norm weights near one so activations keep their scale.
  TensorRef Norm(int64_t n) {
    return Fill({n}, DType::kF32, [&] { return 1.0f + 0.1f * Symmetric(); });
  }
  TensorRef Bias(int64_t n) {
    return Fill({n}, DType::kF32, [&] { return 0.1f * Symmetric(); });
  }

 private:
  float Symmetric() { return static_cast<float>(2.0 * rng_.Uniform() - 1.0); }

  template <typename Gen>
  TensorRef Fill(std::vector<int64_t> shape, DType dtype, Gen gen) {
    TensorRef t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    const int64_t n = t.numel();
    if (dtype == DType::kF32) {
      auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
      for (auto& v : *buf) v = gen();
      t.data = buf->data();
      model_.weights.storage.push_back(buf);
    } else if (IsQuantized(dtype)) {
      std::vector<float> values(static_cast<size_t>(n));
      for (auto& v : values) v = gen();
      auto buf = std::make_shared<std::vector<unsigned char>>(DTypeBytes(dtype, n));
      QuantizeRows(dtype, values.data(), buf->data(), t.shape);
      t.data = buf->data();
      model_.weights.storage.push_back(buf);
    } else {
      auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
      for (auto& v : *buf) v = dtype == DType::kBF16 ? F32ToBf16(gen()) : F32ToF16(gen());
      t.data = buf->data();
      model_.weights.storage.push_back(buf);
    }
    return t;
  }

  // The rows split between the cores: the values are drawn in order first, so the bytes
  // do not depend on the split, and a ~1B model quantizes in seconds rather than a minute.
  static void QuantizeRows(DType dtype, const float* values, unsigned char* out, const std::vector<int64_t>& shape) {
    const int64_t cols = shape.back();
    const int64_t rows = shape.size() == 1 ? 1 : shape[0];
    const size_t row_bytes = DTypeBytes(dtype, cols);
    const int64_t threads =
        std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, std::max<int64_t>(1, rows / 64));
    std::vector<std::thread> pool;
    auto work = [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) quant::Quantize(dtype, values + r * cols, out + r * row_bytes, cols);
    };
    for (int64_t i = 1; i < threads; ++i) pool.emplace_back(work, rows * i / threads, rows * (i + 1) / threads);
    work(0, rows / threads);
    for (auto& th : pool) th.join();
  }

  Model& model_;
  RandomModelOptions options_;
  Rng rng_;
};

}  // namespace

std::unique_ptr<Model> MakeRandomModel(const ModelConfig& config, const RandomModelOptions& options) {
  auto model = std::make_unique<Model>();
  model->source = "random";
  model->config = config;
  WeightFactory f(*model, options);
  const int64_t d = config.hidden_size;
  ModelWeights& w = model->weights;
  w.tok_embeddings = f.Matrix(config.vocab_size, d);
  w.layers.resize(static_cast<size_t>(config.num_layers));
  const int n = config.num_layers;
  for (int li = 0; li < n; ++li) {
    auto& l = w.layers[static_cast<size_t>(li)];
    // The "_M" mixes give more bits to the layers whose errors cost most.
    const bool more_bits = options.k_quant_mix && (li < n / 8 || li >= 7 * n / 8 || (li - n / 8) % 3 == 2);
    const DType sensitive = more_bits ? DType::kQ6_K : options.dtype;
    l.attn_norm = f.Norm(d);
    l.wq = f.Matrix(config.q_dim(), d);
    l.wk = f.Matrix(config.kv_dim(), d);
    l.wv = f.Matrix(config.kv_dim(), d, sensitive);
    l.wo = f.Matrix(d, config.q_dim());
    if (config.qkv_bias) {
      l.bq = f.Bias(config.q_dim());
      l.bk = f.Bias(config.kv_dim());
      l.bv = f.Bias(config.kv_dim());
    }
    l.ffn_norm = f.Norm(d);
    l.w_gate = f.Matrix(config.intermediate_size, d);
    l.w_up = f.Matrix(config.intermediate_size, d);
    l.w_down = f.Matrix(d, config.intermediate_size, sensitive);
  }
  w.final_norm = f.Norm(d);
  w.output = config.tied_embeddings   ? w.tok_embeddings
             : options.k_quant_mix ? f.Matrix(config.vocab_size, d, DType::kQ6_K)
                                   : f.Matrix(config.vocab_size, d);
  return model;
}

ModelConfig Llama100MConfig() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.vocab_size = 32000;
  c.hidden_size = 768;
  c.intermediate_size = 2048;
  c.num_layers = 12;
  c.num_heads = 12;
  c.num_kv_heads = 12;
  c.head_dim = 64;
  c.max_position = 2048;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tied_embeddings = true;  // ~110M parameters, like GPT-2 small
  return c;
}

ModelConfig Llama1BConfig() {
  ModelConfig c = Llama100MConfig();
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_layers = 22;
  c.num_heads = 32;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.tied_embeddings = false;
  return c;
}

}  // namespace crossreg
