#include "engine/model/model_loader.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/io/gguf_file.h"
#include "engine/model/model_config_parse.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectStoriesConfig(const ModelConfig& c) {
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position, 2048);  // llama.context_length in the file
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_TRUE(c.rope_freq_factors.empty());
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
}

bool SameValues(const TensorRef& a, const TensorRef& b) {
  if (a.shape != b.shape) return false;
  std::vector<float> fa(a.numel()), fb(b.numel());
  ConvertToF32(a.dtype, a.data, fa.data(), fa.size());
  ConvertToF32(b.dtype, b.data, fb.data(), fb.size());
  return fa == fb;
}

TEST(ModelLoaderTest, LoadsStories260KGguf) {
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ExpectStoriesConfig(m.config);
  EXPECT_EQ(m.source, testing::Stories260KGguf());
  EXPECT_EQ(m.weights.tok_embeddings.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(m.weights.tok_embeddings.dtype, DType::kF32);
  // output.weight is stored as a byte copy of the embedding: loaded as tied.
  EXPECT_EQ(m.weights.output.data, m.weights.tok_embeddings.data);
  ASSERT_EQ(m.weights.layers.size(), 5u);
  const LayerWeights& l0 = m.weights.layers[0];
  EXPECT_EQ(l0.wq.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l0.wk.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(l0.wv.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(l0.wo.shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l0.w_gate.shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(l0.w_down.shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(l0.attn_norm.dtype, DType::kF32);
  EXPECT_EQ(l0.attn_norm.shape, (std::vector<int64_t>{64}));
  EXPECT_TRUE(l0.bq.empty());
  EXPECT_EQ(m.weights.final_norm.shape, (std::vector<int64_t>{64}));
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
  EXPECT_EQ(m.generation_defaults.temperature, -1.0f);
}

TEST(ModelLoaderTest, PermutesGgufQueryAndKeyRowsToHfOrder) {
  auto model = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(model.ok()) << model.status();
  auto gguf = GgufFile::Open(testing::Stories260KGguf());
  ASSERT_TRUE(gguf.ok());
  const int head_dim = 8, cols = 64;
  for (const char* name : {"attn_q", "attn_k"}) {
    const GgufTensorInfo* raw = (*gguf)->FindTensor(absl::StrCat("blk.3.", name, ".weight"));
    ASSERT_NE(raw, nullptr);
    const TensorRef& loaded = std::string(name) == "attn_q" ? (*model)->weights.layers[3].wq
                                                            : (*model)->weights.layers[3].wk;
    const float* src = static_cast<const float*>(raw->ref.data);
    const float* dst = static_cast<const float*>(loaded.data);
    for (int64_t row = 0; row < loaded.rows(); ++row) {
      const int64_t head = row / head_dim, within = row % head_dim;
      const int64_t h = within / (head_dim / 2), i = within % (head_dim / 2);
      const int64_t old_row = head * head_dim + 2 * i + h;
      ASSERT_EQ(std::memcmp(dst + row * cols, src + old_row * cols, cols * sizeof(float)), 0)
          << name << " row " << row;
    }
  }
  // v is not rotated, so it stays a view of the file.
  const GgufTensorInfo* v = (*gguf)->FindTensor("blk.3.attn_v.weight");
  EXPECT_EQ(std::memcmp(v->ref.data, (*model)->weights.layers[3].wv.data, v->ref.nbytes()), 0);
}

TEST(ModelLoaderTest, HfDirectoryWrittenFromGgufLoadsIdentically) {
  const std::string dir = testing::MakeTempDir("crossreg_hf");
  ASSERT_TRUE(testing::WriteHfModelFromGguf(testing::Stories260KGguf(), dir, 2, DType::kF32).ok());
  auto hf = LoadModel(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  auto gguf = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ExpectStoriesConfig((*hf)->config);
  EXPECT_FLOAT_EQ((*hf)->generation_defaults.temperature, testing::kHfWriterTemperature);
  EXPECT_FLOAT_EQ((*hf)->generation_defaults.top_p, testing::kHfWriterTopP);
  EXPECT_EQ((*hf)->generation_defaults.top_k, testing::kHfWriterTopK);
  ASSERT_NE((*hf)->tokenizer, nullptr);
  EXPECT_EQ((*hf)->tokenizer->vocab_size(), 512);

  const ModelWeights& a = (*gguf)->weights;
  const ModelWeights& b = (*hf)->weights;
  EXPECT_TRUE(SameValues(a.tok_embeddings, b.tok_embeddings));
  EXPECT_TRUE(SameValues(a.final_norm, b.final_norm));
  EXPECT_EQ(b.output.data, b.tok_embeddings.data);
  for (size_t l = 0; l < a.layers.size(); ++l) {
    SCOPED_TRACE(l);
    EXPECT_TRUE(SameValues(a.layers[l].wq, b.layers[l].wq));
    EXPECT_TRUE(SameValues(a.layers[l].wk, b.layers[l].wk));
    EXPECT_TRUE(SameValues(a.layers[l].wv, b.layers[l].wv));
    EXPECT_TRUE(SameValues(a.layers[l].wo, b.layers[l].wo));
    EXPECT_TRUE(SameValues(a.layers[l].attn_norm, b.layers[l].attn_norm));
    EXPECT_TRUE(SameValues(a.layers[l].ffn_norm, b.layers[l].ffn_norm));
    EXPECT_TRUE(SameValues(a.layers[l].w_gate, b.layers[l].w_gate));
    EXPECT_TRUE(SameValues(a.layers[l].w_up, b.layers[l].w_up));
    EXPECT_TRUE(SameValues(a.layers[l].w_down, b.layers[l].w_down));
  }
}

TEST(ModelLoaderTest, HfBf16SingleFileKeepsDtypeAndConvertsNorms) {
  const std::string dir = testing::MakeTempDir("crossreg_hf_bf16");
  ASSERT_TRUE(testing::WriteHfModelFromGguf(testing::Stories260KGguf(), dir, 1, DType::kBF16).ok());
  auto hf = LoadModel(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  auto gguf = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(gguf.ok());
  const LayerWeights& l = (*hf)->weights.layers[1];
  EXPECT_EQ(l.wq.dtype, DType::kBF16);
  EXPECT_EQ(l.attn_norm.dtype, DType::kF32);
  const float* ref = static_cast<const float*>((*gguf)->weights.layers[1].wq.data);
  const uint16_t* got = static_cast<const uint16_t*>(l.wq.data);
  for (int64_t i = 0; i < l.wq.numel(); ++i) {
    ASSERT_NEAR(Bf16ToF32(got[i]), ref[i], std::fabs(ref[i]) * 1e-2f + 1e-6f) << i;
  }
}

TEST(ModelLoaderTest, Llama3RopeScalingMatchesFormula) {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position = 8192;
  const std::vector<float> inv = c.RopeInverseFrequencies();
  ASSERT_EQ(inv.size(), 64u);
  const double pi = std::acos(-1.0);
  int kept = 0, scaled = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * pi / base;
    double expected;
    if (wavelen < 8192.0 / 4.0) {
      expected = base, ++kept;
    } else if (wavelen > 8192.0 / 1.0) {
      expected = base / 8.0, ++scaled;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * base / 8.0 + smooth * base, ++blended;
    }
    EXPECT_NEAR(inv[i], expected, expected * 1e-6) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(blended, 0);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
}

TEST(ModelLoaderTest, LinearScalingAndFreqFactorsDivide) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000.0f;
  const std::vector<float> plain = c.RopeInverseFrequencies();
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_FLOAT_EQ(plain[1], static_cast<float>(std::pow(10000.0, -2.0 / 8)));
  c.rope_scaling.type = RopeScaling::Type::kLinear;
  c.rope_scaling.factor = 4.0f;
  c.rope_freq_factors = {1.0f, 2.0f, 1.0f, 8.0f};
  const std::vector<float> scaled = c.RopeInverseFrequencies();
  EXPECT_FLOAT_EQ(scaled[0], plain[0] / 4.0f);
  EXPECT_FLOAT_EQ(scaled[1], plain[1] / 8.0f);
  EXPECT_FLOAT_EQ(scaled[3], plain[3] / 32.0f);
}

TEST(ModelLoaderTest, ValidateNamesTheField) {
  auto base = LoadModel(testing::Stories260KGguf());
  ASSERT_TRUE(base.ok());
  const ModelConfig good = (*base)->config;
  EXPECT_TRUE(good.Validate().ok());
  auto expect_bad = [&](auto mutate, const char* field) {
    ModelConfig c = good;
    mutate(c);
    absl::Status s = c.Validate();
    EXPECT_FALSE(s.ok()) << field;
    EXPECT_THAT(s.message(), HasSubstr(field));
  };
  expect_bad([](ModelConfig& c) { c.num_kv_heads = 3; }, "num_heads");
  expect_bad([](ModelConfig& c) { c.num_kv_heads = 16; }, "num_kv_heads");
  expect_bad([](ModelConfig& c) { c.head_dim = 7; }, "head_dim");
  expect_bad([](ModelConfig& c) { c.hidden_size = 0; }, "hidden_size");
  expect_bad([](ModelConfig& c) { c.num_layers = -1; }, "num_layers");
  expect_bad([](ModelConfig& c) { c.vocab_size = 0; }, "vocab_size");
  expect_bad([](ModelConfig& c) { c.rms_norm_eps = 0; }, "rms_norm_eps");
  expect_bad([](ModelConfig& c) { c.rope_theta = -1; }, "rope_theta");
  expect_bad([](ModelConfig& c) { c.max_position = 0; }, "max_position");
  expect_bad([](ModelConfig& c) { c.eos_token_ids = {512}; }, "eos_token_ids");
  expect_bad([](ModelConfig& c) { c.bos_token_id = 9999; }, "bos_token_id");
  expect_bad([](ModelConfig& c) { c.rope_freq_factors = {1.0f}; }, "rope_freq_factors");
  expect_bad([](ModelConfig& c) {
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.high_freq_factor = 0.5f;
  }, "high_freq_factor");
}

class ModelLoaderHfConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<ModelConfig> Parse(const std::string& text) {
    const std::string path = dir_ + "/config.json";
    EXPECT_TRUE(testing::WriteBytes(path, text).ok());
    return ModelConfigFromHfJson(path);
  }
  const std::string dir_ = testing::MakeTempDir("crossreg_cfg");
};

constexpr char kMistralConfig[] = R"({
  "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2})";

TEST_F(ModelLoaderHfConfigTest, MistralSlidingWindowCapsContext) {
  auto c = Parse(kMistralConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arch, Architecture::kMistral);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->max_position, 4096);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(2));
}

TEST_F(ModelLoaderHfConfigTest, Qwen2HasBiasAndHonoursUseSlidingWindowFalse) {
  auto c = Parse(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_act": "silu", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 4096, "use_sliding_window": false, "tie_word_embeddings": true,
    "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": [151645, 151643]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arch, Architecture::kQwen2);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_position, 32768);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(151645, 151643));
}

TEST_F(ModelLoaderHfConfigTest, Llama31RopeScalingParsed) {
  auto c = Parse(R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
    "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "vocab_size": 128256, "bos_token_id": 128000,
    "eos_token_id": 128001, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
    "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
    "rope_type": "llama3"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->max_position, 131072);
}

// A model pretrained to draft for itself (training/pretrain.py --hybrid) says so; the
// engine then runs its predictive rows on the base weights, with no adapter.
TEST_F(ModelLoaderHfConfigTest, SelfDraftingModelDeclaresItsPlaceholderAndLayout) {
  const std::string base = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-05, "vocab_size": 300)";
  auto plain = Parse("{" + base + "}");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->self_drafting());
  auto c = Parse("{" + base + R"(, "crossreg_draft": {"placeholder_token_id": 299, "draft_layout": "blocks"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->self_drafting());
  EXPECT_EQ(c->draft_placeholder, 299);
  EXPECT_EQ(c->draft_layout, "blocks");
  EXPECT_EQ(c->draft_block_rows, 0);  // not recorded
  auto deep = Parse("{" + base + R"(, "crossreg_draft": {"placeholder_token_id": 299, "draft_layout": "blocks",
    "block_rows": 6}})");
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ(deep->draft_block_rows, 6);
  for (const auto& [draft, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("crossreg_draft": 3)", "key 'crossreg_draft' must be an object"},
           {R"("crossreg_draft": {"draft_layout": "blocks"})", "crossreg_draft.placeholder_token_id' is missing"},
           {R"("crossreg_draft": {"placeholder_token_id": 300})", "must be in [0, 300), got 300"},
           {R"("crossreg_draft": {"placeholder_token_id": 5, "draft_layout": "tree"})",
            "crossreg_draft.draft_layout' must be \"chain\" or \"blocks\""},
           {R"("crossreg_draft": {"placeholder_token_id": 5, "block_rows": 0})",
            "crossreg_draft.block_rows' must be in [1, 64], got 0"},
           {R"("crossreg_draft": {"placeholder_token_id": 5, "block_rows": "six"})", "crossreg_draft.block_rows"}}) {
    auto bad = Parse("{" + base + ", " + draft + "}");
    ASSERT_FALSE(bad.ok()) << draft;
    EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr(message));
  }
}

}  // namespace
}  // namespace crossreg
