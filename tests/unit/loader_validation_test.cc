// Loader and adapter validation against hostile or broken files: ids, vocabulary sizes
// and adapter metadata are checked before anything is sized from them, and every
// refusal names the file and the field.
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/gguf_file.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Fails unless `status` is an error whose message holds every piece.
void ExpectErrorWith(const absl::Status& status, const std::vector<std::string>& pieces) {
  ASSERT_FALSE(status.ok()) << "expected an error mentioning " << pieces.front();
  for (const std::string& piece : pieces) {
    EXPECT_THAT(std::string(status.message()), HasSubstr(piece));
  }
}

class TempDirTest : public ::testing::Test {
 protected:
  ~TempDirTest() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void Write(const std::string& name, const std::string& text) {
    ASSERT_TRUE(testing::WriteBytes(Path(name), text).ok());
  }
  const std::string dir_ = testing::MakeTempDir("crossreg_validation");
};

// ---- tokenizer.json ids -----------------------------------------------------------------

class HfTokenizerIdsTest : public TempDirTest {
 protected:
  absl::Status Read(const json& tokenizer, int64_t model_vocab = 0) {
    Write("tokenizer.json", tokenizer.dump());
    return TokenizerSpecFromHfJson(Path("tokenizer.json"), model_vocab).status();
  }
  static json ByteLevel(json vocab) {
    return {{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  }
};

TEST_F(HfTokenizerIdsTest, HugeVocabIdIsRefusedBeforeAnyTableIsSized) {
  // Sized from the id, 10^9 would ask for a 10^9-entry table (std::bad_alloc, exit 134)
  // and 10^8 for 3.5 GB; both are refused first, within 2 s.
  const auto start = std::chrono::steady_clock::now();
  for (int64_t id : {int64_t{1000000000}, int64_t{100000000}, int64_t{2}}) {
    SCOPED_TRACE(id);
    ExpectErrorWith(Read(ByteLevel({{"a", 0}, {"b", id}})),
                    {"tokenizer.json", "model.vocab", "'b'", absl::StrCat("id ", id),
                     "outside [0, 2)"});
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ExpectErrorWith(Read(ByteLevel({{"a", 0}, {"b", -1}})), {"model.vocab", "'b'", "id -1"});
  ExpectErrorWith(Read(ByteLevel({{"a", 0}, {"b", 18446744073709551615ull}})),
                  {"model.vocab", "'b'"});
}

TEST_F(HfTokenizerIdsTest, HugeAddedTokenIdIsRefused) {
  json tokenizer = ByteLevel({{"a", 0}, {"b", 1}});
  tokenizer["added_tokens"] = {{{"id", 1000000000}, {"content", "<|x|>"}, {"special", true}}};
  ExpectErrorWith(Read(tokenizer),
                  {"tokenizer.json", "added_tokens", "'<|x|>'", "id 1000000000", "outside [0, 3)"});
  // Added tokens right after the vocabulary are what real files hold.
  tokenizer["added_tokens"][0]["id"] = 2;
  EXPECT_TRUE(Read(tokenizer).ok());
}

TEST_F(HfTokenizerIdsTest, IdsAreBoundedByTheModelsVocabSize) {
  const json tokenizer = ByteLevel({{"a", 0}, {"b", 1}, {"c", 2}});
  EXPECT_TRUE(Read(tokenizer, 3).ok());
  ExpectErrorWith(Read(tokenizer, 2), {"model.vocab", "'c'", "id 2", "the model's vocab_size"});
}

TEST_F(HfTokenizerIdsTest, OneEntryVocabularyIsRefused) {
  ExpectErrorWith(Read(ByteLevel({{"a", 0}})), {"tokenizer.json", "model.vocab", "at least 2"});
  TokenizerSpec one;
  one.tokens = {"a"};
  ExpectErrorWith(Tokenizer::Create(one).status(), {"1 token", "at least 2"});
}

TEST_F(HfTokenizerIdsTest, LongPiecesAreQuotedShortAndEscaped) {
  const std::string piece = std::string(500, 'x') + "\n";
  const absl::Status s = Read(ByteLevel({{"a", 0}, {piece, 99}}));
  ExpectErrorWith(s, {"model.vocab", "xxx...", "id 99"});
  EXPECT_LT(s.message().size(), 300u) << s;
}

// ---- GGUF tokenizer keys ----------------------------------------------------------------

class GgufTokenizerKeysTest : public ::testing::Test {
 protected:
  GgufMetadata Metadata(const testing::GgufWriter& w) {
    auto file = GgufFile::Parse(MappedFile::FromBytes("tiny.gguf", w.Serialize()));
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? (*file)->metadata() : GgufMetadata();
  }
  testing::GgufWriter writer_ = testing::TinyLlamaGguf(testing::TinyVocab::kSentencePiece);
};

TEST_F(GgufTokenizerKeysTest, SpecialIdOutsideTheVocabularyIsAnError) {
  ASSERT_TRUE(TokenizerSpecFromGguf(Metadata(writer_)).ok());
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id"}) {
    SCOPED_TRACE(key);
    testing::GgufWriter w = writer_;
    w.SetUint32(key, 100000);
    ExpectErrorWith(TokenizerSpecFromGguf(Metadata(w)).status(), {key, "100000", "outside"});
  }
  // 0xFFFFFFFF and negative ids mean "none", as converters write them.
  testing::GgufWriter none = writer_;
  none.SetUint32("tokenizer.ggml.bos_token_id", 0xFFFFFFFF);
  none.SetInt32("tokenizer.ggml.eos_token_id", -1);
  auto spec = TokenizerSpecFromGguf(Metadata(none));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos_id, -1);
  EXPECT_EQ(spec->eos_id, -1);
}

TEST_F(GgufTokenizerKeysTest, ArraysAndScoresAreChecked) {
  testing::GgufWriter one = writer_;
  one.SetStringArray("tokenizer.ggml.tokens", {"a"});
  ExpectErrorWith(TokenizerSpecFromGguf(Metadata(one)).status(),
                  {"tokenizer.ggml.tokens", "at least 2"});
  testing::GgufWriter short_types = writer_;
  short_types.SetInt32Array("tokenizer.ggml.token_type", {1, 1, 1});
  ExpectErrorWith(TokenizerSpecFromGguf(Metadata(short_types)).status(),
                  {"tokenizer.ggml.token_type", "3 entries"});
  testing::GgufWriter bad_type = writer_;
  std::vector<int32_t> types(3 + 256 + 26 + 1 + 24, 1);
  types[7] = 9;
  bad_type.SetInt32Array("tokenizer.ggml.token_type", types);
  ExpectErrorWith(TokenizerSpecFromGguf(Metadata(bad_type)).status(),
                  {"tokenizer.ggml.token_type[7]", "9"});
  testing::GgufWriter nan_score = writer_;
  std::vector<float> scores(types.size(), 0.0f);
  scores[5] = std::nanf("");
  nan_score.SetFloat32Array("tokenizer.ggml.scores", scores);
  ExpectErrorWith(TokenizerSpecFromGguf(Metadata(nan_score)).status(),
                  {"tokenizer.ggml.scores[5]", "NaN"});
}

// ---- a model's tokenizer ----------------------------------------------------------------

TEST(TokenizerForModelTest, MustEncodeEveryByteAndFitTheEmbedding) {
  TokenizerSpec spec;
  spec.model = TokenizerSpec::Model::kByteLevelBpe;
  spec.tokens = {"a", "b", "ab"};
  ExpectErrorWith(ValidateTokenizerForModel(spec, 512),
                  {"cannot encode 254 of the 256 byte values", "first: 0x00", "byte-level"});
  ExpectErrorWith(ValidateTokenizerForModel(spec, 2), {"3 tokens", "vocab_size 2"});
  spec.unk_id = 0;  // unencodable bytes become UNK: accepted
  EXPECT_TRUE(ValidateTokenizerForModel(spec, 512).ok());

  spec = TokenizerSpec();
  spec.tokens.clear();
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_level::ByteToSymbol(b));
  spec.model = TokenizerSpec::Model::kByteLevelBpe;
  EXPECT_TRUE(ValidateTokenizerForModel(spec, 300).ok());  // fewer tokens than embeddings is fine

  TokenizerSpec spm;
  spm.tokens = {"<s>", "</s>", "<0x41>", "a"};
  spm.token_types = {TokenizerSpec::TokenType::kControl, TokenizerSpec::TokenType::kControl,
                     TokenizerSpec::TokenType::kByte, TokenizerSpec::TokenType::kNormal};
  ExpectErrorWith(ValidateTokenizerForModel(spm, 512), {"255 of the 256", "<0x00>..<0xFF>"});
}

class ModelTokenizerTest : public TempDirTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(writer_.WriteFile(Path("tiny.gguf")).ok());
    ASSERT_TRUE(testing::WriteHfModelFromGguf(Path("tiny.gguf"), dir_, 1, DType::kF32).ok());
    auto model = LoadModel(dir_);
    ASSERT_TRUE(model.ok()) << model.status();
  }
  testing::GgufWriter writer_ = testing::TinyLlamaGguf(testing::TinyVocab::kByteLevel);
};

TEST_F(ModelTokenizerTest, HfTokenizerIdPastTheModelVocabNamesTokenizerJson) {
  auto text = testing::ReadBytes(Path("tokenizer.json"));
  ASSERT_TRUE(text.ok());
  json j = json::parse(*text);
  j["model"]["vocab"]["Ġcat"] = 1000000000;
  Write("tokenizer.json", j.dump());
  ExpectErrorWith(LoadModel(dir_).status(),
                  {Path("tokenizer.json"), "model.vocab", "1000000000", "vocab_size"});
}

TEST_F(ModelTokenizerTest, TinyHfTokenizerIsRefusedForAModel) {
  Write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1},
      "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})");
  ExpectErrorWith(LoadModel(dir_).status(), {Path("tokenizer.json"), "cannot encode 254"});
  Write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "ByteLevel"}})");
  ExpectErrorWith(LoadModel(dir_).status(), {"tokenizer.json", "at least 2"});
}

TEST_F(ModelTokenizerTest, GgufVocabularyWithoutByteTokensIsRefused) {
  testing::GgufWriter w = testing::TinyLlamaGguf(testing::TinyVocab::kSentencePiece);
  w.RemoveKey("tokenizer.ggml.unknown_token_id");
  std::vector<int32_t> types(3 + 256 + 26 + 1 + 24, 1);
  types[1] = types[2] = 3;  // the byte tokens lose their type: no byte fallback left
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  ASSERT_TRUE(w.WriteFile(Path("nobytes.gguf")).ok());
  ExpectErrorWith(LoadModel(Path("nobytes.gguf")).status(),
                  {"nobytes.gguf", "tokenizer.ggml", "cannot encode 256"});
}

// ---- adapter metadata -------------------------------------------------------------------

ModelConfig AdapterBase() {
  ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.max_position = 64;
  c.bos_token_id = 1;
  c.eos_token_ids = {2, 3};
  return c;
}

class AdapterMetadataTest : public TempDirTest {
 protected:
  void SetUp() override {
    RandomLoraOptions o;
    o.rank = 2;
    o.placeholder_token_id = 49;
    o.window = 16;
    ASSERT_TRUE(WritePeftAdapter(*MakeRandomLoraAdapter(base_, o), base_, dir_).ok());
  }
  absl::StatusOr<std::unique_ptr<LoraAdapter>> Load() { return LoadLoraAdapter(dir_, base_); }
  void EditConfig(const std::function<void(json&)>& edit) {
    json j = json::parse(testing::ReadBytes(Path("adapter_config.json")).value_or("{}"));
    edit(j);
    Write("adapter_config.json", j.dump());
  }
  void WriteCrossreg(const json& j) { Write("crossreg_adapter.json", j.dump()); }
  const ModelConfig base_ = AdapterBase();
};

TEST_F(AdapterMetadataTest, WrittenAdapterCarriesItsMetadata) {
  auto adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ((*adapter)->placeholder_token_id, 49);
  EXPECT_EQ((*adapter)->window, 16);
  EXPECT_FALSE((*adapter)->metadata_missing);
  EXPECT_TRUE((*adapter)->warnings.empty());
  // An adapter trained for outcome blocks says so, and a written one keeps it.
  (*adapter)->draft_layout = "blocks";
  ASSERT_TRUE(WritePeftAdapter(**adapter, base_, dir_).ok());
  adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ((*adapter)->draft_layout, "blocks");
  EXPECT_TRUE((*adapter)->warnings.empty());
}

TEST_F(AdapterMetadataTest, AlphaAndRankMustBePositive) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"lora_alpha", 0, "lora_alpha must be a positive number, got 0"},
      {"lora_alpha", -16, "lora_alpha must be a positive number, got -16"},
      {"lora_alpha", 1e300, "beyond float range"},
      {"lora_alpha", json::array({1}), "got an array"},
      {"alpha_pattern", {{"q_proj", -2.0}}, "alpha_pattern[\"q_proj\"] must be a positive number"},
      {"alpha_pattern", {{"model.layers.1.mlp.up_proj", 0}}, "alpha_pattern[\"model.layers.1.mlp.up_proj\"]"},
      {"r", -2, "\"r\" must be a positive integer, got -2"},
      {"rank_pattern", {{"q_proj", 0}}, "rank_pattern[\"q_proj\"] must be a positive integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    SetUp();
    EditConfig([&](json& j) { j[c.key] = c.value; });
    ExpectErrorWith(Load().status(), {"adapter_config.json", c.message});
  }
}

TEST_F(AdapterMetadataTest, DeeplyNestedValueIsDescribedNotDumped) {
  // Dumping a 200000-deep array into the message would recurse that deep.
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  Write("adapter_config.json", R"({"r": 2, "target_modules": "all-linear", "lora_alpha": )" +
                                   nested + "}");
  ExpectErrorWith(Load().status(), {"adapter_config.json", "lora_alpha", "got an array"});
}

TEST_F(AdapterMetadataTest, MissingCrossregFileLoadsWithAWarning) {
  std::filesystem::remove(Path("crossreg_adapter.json"));
  auto adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_TRUE((*adapter)->metadata_missing);
  EXPECT_EQ((*adapter)->placeholder_token_id, 0);
  ASSERT_EQ((*adapter)->warnings.size(), 1u);
  EXPECT_THAT((*adapter)->warnings[0],
              AllOf(HasSubstr("crossreg_adapter.json not found"), HasSubstr("plain PEFT LoRA"),
                    HasSubstr("placeholder_token_id 0")));
}

TEST_F(AdapterMetadataTest, MissingCrossregFileWarnsWhenTheDefaultPlaceholderIsBos) {
  std::filesystem::remove(Path("crossreg_adapter.json"));
  ModelConfig base = base_;
  base.bos_token_id = 0;
  auto adapter = LoadLoraAdapter(dir_, base);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  ASSERT_EQ((*adapter)->warnings.size(), 1u);
  EXPECT_THAT((*adapter)->warnings[0], HasSubstr("BOS"));
}

TEST_F(AdapterMetadataTest, MalformedCrossregFileNamesTheField) {
  struct Case {
    json value;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {json::array({1, 2}), {"not a JSON object"}},
      {{{"window", 16}}, {"missing \"placeholder_token_id\""}},
      {{{"placeholder_token_id", "49"}}, {"placeholder_token_id must be an integer in [0, 50)", "\"49\""}},
      {{{"placeholder_token_id", 4.5}}, {"placeholder_token_id", "4.5"}},
      {{{"placeholder_token_id", 50}}, {"placeholder_token_id", "[0, 50)", "50"}},
      {{{"placeholder_token_id", 1}}, {"placeholder_token_id", "BOS token (1)", "not BOS"}},
      {{{"placeholder_token_id", 3}}, {"placeholder_token_id", "end-of-sequence token (3)"}},
      {{{"placeholder_token_id", 49}, {"window", 0}}, {"window", "[1, 64]", "context length", "got 0"}},
      {{{"placeholder_token_id", 49}, {"window", 1000000000}}, {"window", "[1, 64]", "1000000000"}},
      {{{"placeholder_token_id", 49}, {"window", "16"}}, {"window", "\"16\""}},
      {{{"placeholder_token_id", 49}, {"layout", "crossreg-v2"}},
       {"layout \"crossreg-v2\" is not supported", "known: \"crossreg-v1\""}},
      {{{"placeholder_token_id", 49}, {"layout", 1}}, {"layout 1", "crossreg-v1"}},
      {{{"placeholder_token_id", 49}, {"draft_layout", "tree"}},
       {"draft_layout must be \"chain\" or \"blocks\"", "\"tree\""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value.dump());
    WriteCrossreg(c.value);
    std::vector<std::string> pieces = c.pieces;
    pieces.push_back(Path("crossreg_adapter.json"));
    ExpectErrorWith(Load().status(), pieces);
  }
  Write("crossreg_adapter.json", "{\"placeholder_token_id\": 49,");
  ExpectErrorWith(Load().status(), {"crossreg_adapter.json", "not valid JSON"});
}

TEST_F(AdapterMetadataTest, OptionalFieldsAndUnknownKeys) {
  WriteCrossreg({{"placeholder_token_id", 7}});  // older exports: no window, no layout
  auto adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ((*adapter)->placeholder_token_id, 7);
  EXPECT_EQ((*adapter)->window, 0);
  EXPECT_EQ((*adapter)->draft_layout, "chain");
  EXPECT_TRUE((*adapter)->warnings.empty());
  WriteCrossreg({{"placeholder_token_id", 7}, {"window", 64}, {"layout", "crossreg-v1"},
                 {"trained_on", "stories"}});
  adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ((*adapter)->window, 64);
  EXPECT_EQ((*adapter)->draft_layout, "chain");
  ASSERT_EQ((*adapter)->warnings.size(), 1u);
  EXPECT_THAT((*adapter)->warnings[0], HasSubstr("unknown key \"trained_on\" ignored"));
}

}  // namespace
}  // namespace crossreg
