#include "engine/model/lora_adapter.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "engine/model/peft_writer.h"
#include "engine/io/safetensors_writer.h"

namespace crossreg {
namespace {

using ::crossreg::PeftModulePath;
using ::crossreg::SafetensorsEntry;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr LoraTarget kAllTargets[] = {LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,
                                      LoraTarget::kO,    LoraTarget::kGate, LoraTarget::kUp,
                                      LoraTarget::kDown};

ModelConfig TinyBase() {
  ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.max_position = 64;
  return c;
}

// A random matrix of the given rank for target `t` (seeded, all layers alike).
LoraMatrix RandomMatrix(const ModelConfig& base, LoraTarget t, int rank, uint64_t seed) {
  RandomLoraOptions o;
  o.rank = rank;
  o.seed = seed;
  return MakeRandomLoraAdapter(base, o)->layers[0].at(t);
}

class LoraAdapterTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  void Write(const LoraAdapter& adapter, DType dtype = DType::kF32) {
    ASSERT_TRUE(WritePeftAdapter(adapter, base_, dir_, dtype).ok());
  }
  void WriteRandom(int rank = 4) {
    RandomLoraOptions o;
    o.rank = rank;
    Write(*MakeRandomLoraAdapter(base_, o));
  }

  json ReadConfig() const {
    auto bytes = testing::ReadBytes(Path("adapter_config.json"));
    EXPECT_TRUE(bytes.ok());
    return json::parse(bytes.value_or("{}"), nullptr, false);
  }
  void WriteConfig(const json& j) {
    ASSERT_TRUE(testing::WriteBytes(Path("adapter_config.json"), j.dump()).ok());
  }
  void EditConfig(const std::function<void(json&)>& edit) {
    json j = ReadConfig();
    edit(j);
    WriteConfig(j);
  }

  // Reads adapter_model.safetensors back as entries, lets `edit` change them, rewrites it.
  void EditTensors(const std::function<void(std::vector<SafetensorsEntry>&)>& edit) {
    std::vector<SafetensorsEntry> entries;
    {
      auto file = SafetensorsFile::Open(Path("adapter_model.safetensors"));
      ASSERT_TRUE(file.ok()) << file.status();
      for (const auto& [name, ref] : (*file)->tensors()) {
        entries.push_back({name, std::string(DTypeName(ref.dtype)), ref.shape,
                           std::string(static_cast<const char*>(ref.data), ref.nbytes())});
      }
    }
    edit(entries);
    ASSERT_TRUE(WriteSafetensors(Path("adapter_model.safetensors"), entries).ok());
  }

  absl::StatusOr<std::unique_ptr<LoraAdapter>> Load() const { return LoadLoraAdapter(dir_, base_); }

  // Expects loading to fail with `code` and a message containing every piece.
  void ExpectError(absl::StatusCode code, const std::vector<std::string>& pieces) const {
    auto loaded = Load();
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), code) << loaded.status();
    for (const std::string& piece : pieces) {
      EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(piece));
    }
  }

  const ModelConfig base_ = TinyBase();
  const std::string dir_ = testing::MakeTempDir("crossreg_lora");
};

// Every matrix equal after mapping the expected values through `round`.
void ExpectSameAdapter(const LoraAdapter& want, const LoraAdapter& got,
                       const std::function<float(float)>& round) {
  ASSERT_EQ(want.layers.size(), got.layers.size());
  EXPECT_EQ(want.placeholder_token_id, got.placeholder_token_id);
  EXPECT_EQ(want.max_rank, got.max_rank);
  for (size_t i = 0; i < want.layers.size(); ++i) {
    for (LoraTarget t : kAllTargets) {
      const LoraMatrix& w = want.layers[i].at(t);
      const LoraMatrix& g = got.layers[i].at(t);
      SCOPED_TRACE(PeftModulePath(static_cast<int>(i), t));
      ASSERT_EQ(w.rank, g.rank);
      EXPECT_EQ(w.scale, g.scale);
      ASSERT_EQ(w.a.size(), g.a.size());
      ASSERT_EQ(w.b.size(), g.b.size());
      for (size_t k = 0; k < w.a.size(); ++k) ASSERT_EQ(round(w.a[k]), g.a[k]) << "A " << k;
      for (size_t k = 0; k < w.b.size(); ++k) ASSERT_EQ(round(w.b[k]), g.b[k]) << "B " << k;
    }
  }
}

TEST_F(LoraAdapterTest, TargetNames) {
  EXPECT_STREQ(LoraTargetName(LoraTarget::kQ), "q_proj");
  EXPECT_STREQ(LoraTargetName(LoraTarget::kO), "o_proj");
  EXPECT_STREQ(LoraTargetName(LoraTarget::kGate), "gate_proj");
  EXPECT_STREQ(LoraTargetName(LoraTarget::kDown), "down_proj");
}

TEST_F(LoraAdapterTest, RandomAdapterIsDeterministicAndBounded) {
  RandomLoraOptions o;
  o.rank = 3;
  o.alpha = 6.0f;
  o.magnitude = 0.5f;
  o.seed = 42;
  auto a = MakeRandomLoraAdapter(base_, o);
  auto b = MakeRandomLoraAdapter(base_, o);
  ExpectSameAdapter(*a, *b, [](float x) { return x; });
  EXPECT_EQ(a->max_rank, 3);
  ASSERT_EQ(a->layers.size(), 2u);
  for (const LoraLayer& layer : a->layers) {
    for (LoraTarget t : kAllTargets) {
      const LoraMatrix& m = layer.at(t);
      EXPECT_EQ(m.rank, 3);
      EXPECT_FLOAT_EQ(m.scale, 2.0f);
      const size_t in = m.a.size() / 3;
      for (float x : m.a) EXPECT_LE(std::abs(x), 0.5f / std::sqrt(static_cast<float>(in)));
      for (float x : m.b) EXPECT_LE(std::abs(x), 0.5f / std::sqrt(3.0f));
    }
  }
  EXPECT_EQ(a->layers[1].at(LoraTarget::kQ).a.size(), 3u * 16);
  EXPECT_EQ(a->layers[1].at(LoraTarget::kK).b.size(), 8u * 3);
  EXPECT_EQ(a->layers[1].at(LoraTarget::kDown).a.size(), 3u * 24);

  o.seed = 43;
  EXPECT_NE(MakeRandomLoraAdapter(base_, o)->layers[0].at(LoraTarget::kQ).a, a->layers[0].at(LoraTarget::kQ).a);
  o.seed = 42;
  o.zero_b = true;  // same A as without zero_b
  auto identity = MakeRandomLoraAdapter(base_, o);
  for (float x : identity->layers[1].at(LoraTarget::kUp).b) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(identity->layers[1].at(LoraTarget::kUp).a, a->layers[1].at(LoraTarget::kUp).a);
}

TEST_F(LoraAdapterTest, RoundTripF32IsExact) {
  RandomLoraOptions o;
  o.rank = 4;
  o.alpha = 7.0f;
  o.placeholder_token_id = 7;
  auto adapter = MakeRandomLoraAdapter(base_, o);
  Write(*adapter);
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return x; });
  EXPECT_EQ((*loaded)->source, dir_);
}

TEST_F(LoraAdapterTest, RoundTripBf16AndF16WithinRounding) {
  auto adapter = MakeRandomLoraAdapter(base_, RandomLoraOptions{});
  Write(*adapter, DType::kBF16);
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return Bf16ToF32(F32ToBf16(x)); });
  const float a0 = adapter->layers[0].at(LoraTarget::kQ).a[0];
  EXPECT_NEAR((*loaded)->layers[0].at(LoraTarget::kQ).a[0], a0, std::abs(a0) / 256);

  Write(*adapter, DType::kF16);
  loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return F16ToF32(F32ToF16(x)); });
}

TEST_F(LoraAdapterTest, TargetSubsetLeavesOtherModulesAbsent) {
  auto adapter = MakeRandomLoraAdapter(base_, RandomLoraOptions{});
  for (LoraLayer& layer : adapter->layers) {
    for (LoraTarget t : kAllTargets) {
      if (t != LoraTarget::kQ && t != LoraTarget::kV) layer.at(t) = LoraMatrix{};
    }
  }
  Write(*adapter);
  EXPECT_EQ(ReadConfig()["target_modules"], json({"q_proj", "v_proj"}));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return x; });
  EXPECT_TRUE((*loaded)->layers[1].at(LoraTarget::kV).present());
  EXPECT_FALSE((*loaded)->layers[1].at(LoraTarget::kK).present());
  EXPECT_FALSE((*loaded)->layers[0].at(LoraTarget::kDown).present());
}

TEST_F(LoraAdapterTest, LayersToTransformAdaptsOnlyListedLayers) {
  auto adapter = MakeRandomLoraAdapter(base_, RandomLoraOptions{});
  adapter->layers[0] = LoraLayer{};
  Write(*adapter);
  EXPECT_EQ(ReadConfig()["layers_to_transform"], json({1}));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return x; });

  EditConfig([](json& j) { j["layers_to_transform"] = json({0}); });
  ExpectError(absl::StatusCode::kInvalidArgument, {"layers_to_transform", "layers.1."});
  EditConfig([](json& j) { j["layers_to_transform"] = json({2}); });
  ExpectError(absl::StatusCode::kInvalidArgument, {"layers_to_transform index 2"});
}

TEST_F(LoraAdapterTest, AllLinearMeansAllSevenTargets) {
  WriteRandom();
  EditConfig([](json& j) { j["target_modules"] = "all-linear"; });
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (LoraTarget t : kAllTargets) EXPECT_TRUE((*loaded)->layers[1].at(t).present());
}

TEST_F(LoraAdapterTest, AcceptsNamesWithoutPrefixAndWithDefaultAdapterName) {
  auto adapter = MakeRandomLoraAdapter(base_, RandomLoraOptions{});
  Write(*adapter);
  EditTensors([](std::vector<SafetensorsEntry>& entries) {
    const std::string prefix = "base_model.model.";
    for (size_t i = 0; i < entries.size(); ++i) {
      std::string& name = entries[i].name;
      if (i % 2 == 0) name = name.substr(prefix.size());
      if (i % 3 == 0) name.replace(name.size() - std::string(".weight").size(), 0, ".default");
    }
  });
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAdapter(*adapter, **loaded, [](float x) { return x; });
}

TEST_F(LoraAdapterTest, RankAndAlphaPatternsSetPerMatrixRankAndScale) {
  auto adapter = MakeRandomLoraAdapter(base_, RandomLoraOptions{});  // rank 4
  adapter->layers[1].at(LoraTarget::kQ) = RandomMatrix(base_, LoraTarget::kQ, 2, 5);
  for (LoraLayer& layer : adapter->layers) layer.at(LoraTarget::kV) = RandomMatrix(base_, LoraTarget::kV, 3, 6);
  Write(*adapter);
  // Hand-written patterns with short keys (the writer uses full paths).
  EditConfig([](json& j) {
    j["r"] = 4;
    j["lora_alpha"] = 8;
    j["rank_pattern"] = {{"layers.1.self_attn.q_proj", 2}, {"v_proj", 3}};
    // "_proj" is not a whole path component, so it matches nothing.
    j["alpha_pattern"] = {{"down_proj", 6}, {"model.layers.1.mlp.down_proj", 12}, {"_proj", 100}};
  });
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoraAdapter& got = **loaded;
  EXPECT_EQ(got.layers[0].at(LoraTarget::kQ).rank, 4);
  EXPECT_FLOAT_EQ(got.layers[0].at(LoraTarget::kQ).scale, 2.0f);
  EXPECT_EQ(got.layers[1].at(LoraTarget::kQ).rank, 2);
  EXPECT_FLOAT_EQ(got.layers[1].at(LoraTarget::kQ).scale, 4.0f);
  EXPECT_EQ(got.layers[0].at(LoraTarget::kV).rank, 3);
  EXPECT_FLOAT_EQ(got.layers[0].at(LoraTarget::kV).scale, 8.0f / 3);
  EXPECT_FLOAT_EQ(got.layers[0].at(LoraTarget::kDown).scale, 1.5f);  // 6 / 4
  EXPECT_FLOAT_EQ(got.layers[1].at(LoraTarget::kDown).scale, 3.0f);  // longest key: 12 / 4
  EXPECT_FLOAT_EQ(got.layers[1].at(LoraTarget::kUp).scale, 2.0f);
  EXPECT_EQ(got.max_rank, 4);
  EXPECT_EQ(got.layers[1].at(LoraTarget::kQ).a, adapter->layers[1].at(LoraTarget::kQ).a);

  // A pattern rank that disagrees with the stored tensors is a shape error.
  EditConfig([](json& j) { j["rank_pattern"] = {{"v_proj", 2}}; });
  ExpectError(absl::StatusCode::kInvalidArgument, {"v_proj.lora_A.weight", "[3, 16]", "[2, 16]"});
}

TEST_F(LoraAdapterTest, RsloraScalesByAlphaOverSqrtRank) {
  WriteRandom(4);
  EditConfig([](json& j) {
    j["lora_alpha"] = 8;
    j["use_rslora"] = true;
  });
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FLOAT_EQ((*loaded)->layers[0].at(LoraTarget::kK).scale, 4.0f);  // 8 / sqrt(4)

  EditConfig([](json& j) {
    j.erase("lora_alpha");  // defaults to r
    j["use_rslora"] = false;
  });
  loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FLOAT_EQ((*loaded)->layers[0].at(LoraTarget::kK).scale, 1.0f);
}

TEST_F(LoraAdapterTest, MissingFilesAreNotFound) {
  ExpectError(absl::StatusCode::kNotFound, {Path("adapter_config.json")});
  WriteRandom();
  std::filesystem::remove(Path("adapter_model.safetensors"));
  ExpectError(absl::StatusCode::kNotFound, {Path("adapter_model.safetensors")});
  ASSERT_TRUE(testing::WriteBytes(Path("adapter_model.bin"), "PK\x03\x04").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_model.bin", "only adapter_model.safetensors"});
}

TEST_F(LoraAdapterTest, BadJsonIsInvalidArgument) {
  WriteRandom();
  ASSERT_TRUE(testing::WriteBytes(Path("adapter_config.json"), "{\"r\": 4,").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_config.json", "not valid JSON"});
  ASSERT_TRUE(testing::WriteBytes(Path("adapter_config.json"), "[1, 2]").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_config.json", "not a JSON object"});
  WriteRandom();
  ASSERT_TRUE(testing::WriteBytes(Path("crossreg_adapter.json"), "nope").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"crossreg_adapter.json", "not valid JSON"});
}

TEST_F(LoraAdapterTest, UnknownTargetModuleIsNamed) {
  WriteRandom();
  EditConfig([](json& j) { j["target_modules"] = {"q_proj", "lm_head"}; });
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_config.json", "unknown target module \"lm_head\""});
  EditConfig([](json& j) { j["target_modules"] = ".*proj"; });
  ExpectError(absl::StatusCode::kInvalidArgument, {"target_modules \".*proj\""});
}

TEST_F(LoraAdapterTest, WrongShapeNamesTensorAndShapes) {
  WriteRandom(4);
  const std::string name = PeftModulePath(0, LoraTarget::kQ) + ".lora_A.weight";
  EditTensors([&](std::vector<SafetensorsEntry>& entries) {
    for (SafetensorsEntry& e : entries) {
      if (e.name == name) e = F32Entry(name, {4, 15}, std::vector<float>(60, 0.5f));
    }
  });
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"adapter_model.safetensors", name, "[4, 15]", "expected [4, 16]"});
}

TEST_F(LoraAdapterTest, MissingBForAdaptedModuleIsNamed) {
  WriteRandom();
  const std::string name = PeftModulePath(1, LoraTarget::kK) + ".lora_B.weight";
  EditTensors([&](std::vector<SafetensorsEntry>& entries) {
    std::erase_if(entries, [&](const SafetensorsEntry& e) { return e.name == name; });
  });
  ExpectError(absl::StatusCode::kInvalidArgument, {"missing lora_B for layer 1 k_proj", name});
}

TEST_F(LoraAdapterTest, LayerIndexOutOfRangeIsNamed) {
  WriteRandom();
  const std::string bad = "base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight";
  EditTensors([&](std::vector<SafetensorsEntry>& entries) {
    SafetensorsEntry extra = entries.front();
    extra.name = bad;
    entries.push_back(extra);
  });
  ExpectError(absl::StatusCode::kInvalidArgument, {bad, "layer index 2", "2 layers"});
}

TEST_F(LoraAdapterTest, UnsupportedDtypeIsNamed) {
  WriteRandom();
  EditTensors([](std::vector<SafetensorsEntry>& entries) { entries[3].dtype = "I32"; });
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_model.safetensors", "I32"});
}

TEST_F(LoraAdapterTest, FanInFanOutTrueIsRefused) {
  WriteRandom();
  EditConfig([](json& j) { j["fan_in_fan_out"] = true; });
  ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_config.json", "fan_in_fan_out"});
}

TEST_F(LoraAdapterTest, TensorForUntargetedModuleIsNamed) {
  WriteRandom();
  EditConfig([](json& j) {
    j["target_modules"] = {"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  });
  ExpectError(absl::StatusCode::kInvalidArgument,
              {PeftModulePath(0, LoraTarget::kK) + ".lora_A.weight", "not in target_modules"});
}

TEST_F(LoraAdapterTest, UnknownLoraTensorNameIsNamed) {
  WriteRandom();
  const std::string bad = "base_model.model.model.layers.0.self_attn.q_proj.lora_embedding_A";
  EditTensors([&](std::vector<SafetensorsEntry>& entries) {
    entries.push_back(F32Entry(bad, {2}, {1, 2}));
  });
  ExpectError(absl::StatusCode::kInvalidArgument, {"unrecognised LoRA tensor", bad});
}

TEST_F(LoraAdapterTest, OtherTensorsAreIgnored) {
  WriteRandom();
  EditTensors([](std::vector<SafetensorsEntry>& entries) {
    entries.push_back(F32Entry("base_model.model.lm_head.weight", {2}, {1, 2}));
  });
  EXPECT_TRUE(Load().ok());
}

TEST_F(LoraAdapterTest, RejectsBadConfigFields) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"peft_type", "IA3", "peft_type"},
      {"r", 0, "\"r\" must be a positive integer"},
      {"r", 2.5, "\"r\" must be a positive integer"},
      {"lora_alpha", "big", "lora_alpha"},
      {"bias", "all", "bias"},
      {"use_dora", true, "use_dora"},
      {"target_modules", json::array(), "target_modules is empty"},
      {"rank_pattern", {{"q_proj", -1}}, "rank_pattern[\"q_proj\"]"},
      {"alpha_pattern", {{"q_proj", "x"}}, "alpha_pattern[\"q_proj\"]"},
      {"layers_to_transform", "all", "layers_to_transform"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    WriteRandom();
    EditConfig([&](json& j) { j[c.key] = c.value; });
    ExpectError(absl::StatusCode::kInvalidArgument, {"adapter_config.json", c.message});
  }
  WriteRandom();
  EditConfig([](json& j) { j.erase("r"); });
  ExpectError(absl::StatusCode::kInvalidArgument, {"missing \"r\""});
}

TEST_F(LoraAdapterTest, PlaceholderTokenMustBeInVocab) {
  WriteRandom();
  ASSERT_TRUE(testing::WriteBytes(Path("crossreg_adapter.json"),
                                  R"({"placeholder_token_id": 50, "window": 4})").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"crossreg_adapter.json", "placeholder_token_id", "[0, 50)"});
  // The file exists to name the placeholder: without it, it is malformed.
  ASSERT_TRUE(testing::WriteBytes(Path("crossreg_adapter.json"), R"({"window": 4})").ok());
  ExpectError(absl::StatusCode::kInvalidArgument, {"crossreg_adapter.json", "missing \"placeholder_token_id\""});
  // Without the file the adapter loads with placeholder 0 and a warning
  // (loader_validation_test.cc has the details).
  std::filesystem::remove(Path("crossreg_adapter.json"));
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->placeholder_token_id, 0);
  EXPECT_TRUE((*loaded)->metadata_missing);
}

}  // namespace
}  // namespace crossreg
