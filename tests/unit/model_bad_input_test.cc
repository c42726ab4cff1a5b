// Every kind of bad model input yields a clear error, never a crash.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "engine/io/gguf_file.h"
#include "engine/io/safetensors_file.h"
#include "engine/model/model_config_parse.h"
#include "engine/model/model_loader.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "engine/io/safetensors_writer.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

using ::crossreg::testing::GgufWriter;
using ::testing::HasSubstr;

class ModelBadInputTest : public ::testing::Test {
 protected:
  GgufWriter Stories() {
    auto file = GgufFile::Open(testing::Stories260KGguf());
    EXPECT_TRUE(file.ok()) << file.status();
    return GgufWriter::FromFile(**file);
  }
  // Loads `w` written to a fresh file; returns the error.
  absl::Status LoadGguf(const GgufWriter& w) {
    const std::string path = dir_ + "/model.gguf";
    EXPECT_TRUE(w.WriteFile(path).ok());
    auto model = LoadModel(path);
    return model.status();
  }
  // A valid HF directory written from stories260K.
  std::string HfDir() {
    const std::string dir = testing::MakeTempDir("crossreg_bad_hf");
    absl::Status s = testing::WriteHfModelFromGguf(testing::Stories260KGguf(), dir, 2, DType::kF32);
    EXPECT_TRUE(s.ok()) << s;
    return dir;
  }
  absl::Status ParseConfig(const std::string& text) {
    const std::string path = dir_ + "/config.json";
    EXPECT_TRUE(testing::WriteBytes(path, text).ok());
    return ModelConfigFromHfJson(path).status();
  }
  const std::string dir_ = testing::MakeTempDir("crossreg_bad");
};

TEST_F(ModelBadInputTest, MissingPathIsNotFound) {
  auto model = LoadModel(dir_ + "/nothing_here.gguf");
  EXPECT_TRUE(absl::IsNotFound(model.status()));
  EXPECT_THAT(model.status().message(), HasSubstr("nothing_here.gguf"));
}

TEST_F(ModelBadInputTest, WrongMagic) {
  std::string bytes = Stories().Serialize();
  bytes.replace(0, 4, "GGML");
  const std::string path = dir_ + "/magic.gguf";
  ASSERT_TRUE(testing::WriteBytes(path, bytes).ok());
  auto model = LoadModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("magic"));
  EXPECT_THAT(model.status().message(), HasSubstr("magic.gguf"));
}

TEST_F(ModelBadInputTest, TruncatedGgufSampledOffsets) {
  const std::string bytes = Stories().Serialize();
  const std::string path = dir_ + "/trunc.gguf";
  for (size_t len = 0; len < bytes.size(); len += len < 9000 ? 37 : 40009) {
    ASSERT_TRUE(testing::WriteBytes(path, bytes.substr(0, len)).ok());
    auto model = LoadModel(path);
    ASSERT_FALSE(model.ok()) << len;
    EXPECT_THAT(model.status().message(), HasSubstr("trunc.gguf")) << len;
  }
}

TEST_F(ModelBadInputTest, TruncatedSafetensorsShard) {
  const std::string dir = HfDir();
  const std::string shard = dir + "/model-00002-of-00002.safetensors";
  auto full = testing::ReadBytes(shard);
  ASSERT_TRUE(full.ok());
  for (size_t len = 0; len < full->size(); len += len < 4096 ? 13 : 30011) {
    ASSERT_TRUE(testing::WriteBytes(shard, full->substr(0, len)).ok());
    auto model = LoadModel(dir);
    ASSERT_FALSE(model.ok()) << len;
    EXPECT_THAT(model.status().message(), HasSubstr("model-00002-of-00002.safetensors")) << len;
  }
}

TEST_F(ModelBadInputTest, MissingTensorGguf) {
  GgufWriter w = Stories();
  w.RemoveTensor("blk.2.ffn_up.weight");
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("blk.2.ffn_up.weight"));
  EXPECT_THAT(s.message(), HasSubstr("missing"));
}

TEST_F(ModelBadInputTest, MissingTensorHf) {
  const std::string dir = HfDir();
  // Drop one tensor from the index and its shard both.
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00002-of-00002.safetensors",
                                        {F32Entry("unused", {1}, {0})})
                  .ok());
  ASSERT_TRUE(testing::WriteBytes(dir + "/model.safetensors.index.json",
                                  R"({"weight_map": {"unused": "model-00002-of-00002.safetensors"}})")
                  .ok());
  auto model = LoadModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("model.embed_tokens.weight"));
}

TEST_F(ModelBadInputTest, WrongTensorShape) {
  GgufWriter w = Stories();
  w.SetTensorF32("blk.0.attn_k.weight", {64, 64}, std::vector<float>(64 * 64, 0.0f));
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("blk.0.attn_k.weight"));
  EXPECT_THAT(s.message(), HasSubstr("[64, 64]"));
  EXPECT_THAT(s.message(), HasSubstr("expected [32, 64]"));
}

TEST_F(ModelBadInputTest, VocabSizeDisagreesWithEmbedding) {
  GgufWriter w = Stories();
  w.SetUint32("llama.vocab_size", 600);
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("token_embd.weight"));
  EXPECT_THAT(s.message(), HasSubstr("expected [600, 64]"));
}

TEST_F(ModelBadInputTest, UnsupportedGgufTensorType) {
  GgufWriter w = Stories();
  // IQ2_XXS (type 16): a block type crossreg does not read; its name and the supported ones
  // are in the message.
  w.SetTensor("blk.0.ffn_up.weight", 16, {172, 64}, std::string(172 * 66, '\0'));
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("IQ2_XXS"));
  EXPECT_THAT(s.message(), HasSubstr("type 16"));
  EXPECT_THAT(s.message(), HasSubstr("blk.0.ffn_up.weight"));
  EXPECT_THAT(s.message(), HasSubstr("Q4_K"));
}

TEST_F(ModelBadInputTest, QuantizedRowsThatAreNotWholeBlocksAreRefused) {
  GgufWriter w = Stories();
  // stories260K's ffn_down rows have 172 inputs: not whole Q8_0 blocks of 32.
  w.SetTensor("blk.0.ffn_down.weight", testing::kGgmlQ8_0, {64, 172}, std::string(64 * 6 * 34, '\0'));
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("blk.0.ffn_down.weight"));
  EXPECT_THAT(s.message(), HasSubstr("not a whole number of Q8_0 blocks"));
}

TEST_F(ModelBadInputTest, UnsupportedSafetensorsDtype) {
  const std::string dir = HfDir();
  const std::string shard = dir + "/model-00002-of-00002.safetensors";
  auto file = SafetensorsFile::Open(shard);
  ASSERT_TRUE(file.ok());
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, ref] : (*file)->tensors()) {
    entries.push_back({name, "F32", ref.shape,
                       std::string(static_cast<const char*>(ref.data), ref.nbytes())});
  }
  entries.front().dtype = "I8";
  entries.front().shape.back() *= 4;  // same bytes, as int8
  const std::string bad_name = entries.front().name;
  file->reset();
  ASSERT_TRUE(WriteSafetensors(shard, entries).ok());
  auto model = LoadModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("I8"));
  EXPECT_THAT(model.status().message(), HasSubstr(bad_name));
}

TEST_F(ModelBadInputTest, UnsupportedGgufArchitecture) {
  GgufWriter w = Stories();
  w.SetString("general.architecture", "gpt2");
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'gpt2'"));
  EXPECT_THAT(s.message(), HasSubstr("model.gguf"));
}

TEST_F(ModelBadInputTest, MissingGgufKey) {
  GgufWriter w = Stories();
  w.RemoveKey("llama.block_count");
  absl::Status s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("llama.block_count"));
  w = Stories();
  w.SetString("llama.embedding_length", "sixty-four");
  s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("llama.embedding_length"));
  w = Stories();
  w.SetString("llama.rope.scaling.type", "yarn");
  s = LoadGguf(w);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("yarn"));
}

TEST_F(ModelBadInputTest, UnsupportedHfArchitecture) {
  absl::Status s = ParseConfig(R"({"model_type": "gpt_neox", "hidden_size": 64})");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("gpt_neox"));
  EXPECT_THAT(s.message(), HasSubstr("config.json"));
  s = ParseConfig(R"({"architectures": ["GPTNeoXForCausalLM"]})");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("GPTNeoXForCausalLM"));
  // Through LoadModel too.
  const std::string dir = HfDir();
  ASSERT_TRUE(testing::WriteBytes(dir + "/config.json", R"({"model_type": "gpt_neox"})").ok());
  auto model = LoadModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("gpt_neox"));
}

constexpr char kGoodConfig[] = R"({"model_type": "llama", "hidden_size": 64,
  "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
  "num_key_value_heads": 4, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
  "vocab_size": 512})";

TEST_F(ModelBadInputTest, MalformedConfigJson) {
  EXPECT_TRUE(ParseConfig(kGoodConfig).ok());
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"this is not json", "not valid JSON"},
      {"[1, 2, 3]", "not a JSON object"},
      {"", "not valid JSON"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": "64"})",
       "'hidden_size' must be an integer"},
      {R"({"model_type": 7})", "'model_type' must be a string"},
      {R"({"model_type": "llama"})", "'vocab_size' is missing"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64,
           "intermediate_size": 172, "num_attention_heads": 8})", "'num_hidden_layers' is missing"},
      {R"({"model_type": "llama", "hidden_act": "gelu"})", "gelu"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64.5})",
       "'hidden_size' must be an integer"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 512,
           "rms_norm_eps": "tiny"})", "'rms_norm_eps' must be a number"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 512,
           "rms_norm_eps": 1e-5, "rope_scaling": {"rope_type": "yarn", "factor": 4}})", "yarn"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 512,
           "rms_norm_eps": 1e-5, "rope_scaling": {"rope_type": "llama3", "factor": 8}})",
       "low_freq_factor"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 3,
           "max_position_embeddings": 512, "rms_norm_eps": 1e-5})", "num_kv_heads"},
      {R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 512,
           "rms_norm_eps": 1e-5, "eos_token_id": "two"})", "eos_token_id"},
      {R"({"model_type": "llama", "vocab_size": 99999999999, "hidden_size": 64})", "vocab_size"},
      {R"({"model_type": "llama", "vocab_size": -5, "hidden_size": 64, "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 512,
           "rms_norm_eps": 1e-5})", "vocab_size"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseConfig(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(s.message(), HasSubstr("config.json")) << c.text;
  }
}

TEST_F(ModelBadInputTest, MalformedGenerationConfig) {
  const std::string dir = HfDir();
  ASSERT_TRUE(testing::WriteBytes(dir + "/generation_config.json", R"({"temperature": "hot"})").ok());
  auto model = LoadModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("generation_config.json"));
  EXPECT_THAT(model.status().message(), HasSubstr("temperature"));
}

TEST_F(ModelBadInputTest, MissingConfigJson) {
  const std::string dir = testing::MakeTempDir("crossreg_noconfig");
  auto model = LoadModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("config.json"));
}

}  // namespace
}  // namespace crossreg
