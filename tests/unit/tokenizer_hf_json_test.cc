// tokenizer.json: round trip through WriteHfTokenizerJson, and clear errors on bad files.
#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gtest/gtest.h"
#include "tests/testing/hf_tokenizer_writer.h"
#include "tests/unit/tokenizer_test_vectors.h"

namespace crossreg {
namespace {

using testing::LoadGgufTokenizerSpec;
using testing::LoadTokenizerTestCases;
using testing::TokenizerTestData;
using testing::WriteHfTokenizerJson;

std::string TempPath(const std::string& name) {
  // Per process: ctest runs these tests in parallel processes.
  return ::testing::TempDir() + "/crossreg_tokenizer_" + std::to_string(::getpid()) + "_" + name;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

class TokenizerHfJsonRoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerHfJsonRoundTripTest, EncodesLikeTheGgufVocab) {
  const std::string name = GetParam();
  absl::StatusOr<TokenizerSpec> original = LoadGgufTokenizerSpec(TokenizerTestData(name));
  ASSERT_TRUE(original.ok()) << original.status();
  const std::string path = TempPath(name + ".tokenizer.json");
  ASSERT_TRUE(WriteHfTokenizerJson(*original, path).ok());
  absl::StatusOr<TokenizerSpec> reread = TokenizerSpecFromHfJson(path);
  ASSERT_TRUE(reread.ok()) << reread.status();
  std::remove(path.c_str());

  EXPECT_EQ(reread->model, original->model);
  EXPECT_EQ(reread->pre, original->pre);
  EXPECT_EQ(reread->tokens, original->tokens);
  EXPECT_EQ(reread->bos_id, original->bos_id);
  EXPECT_EQ(reread->add_bos, original->add_bos);
  EXPECT_EQ(reread->add_space_prefix, original->add_space_prefix);

  auto a = Tokenizer::Create(*original);
  auto b = Tokenizer::Create(*reread);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& c : LoadTokenizerTestCases(name)) {
    for (bool add_special : {false, true}) {
      EXPECT_EQ((*b)->Encode(c.text, add_special), (*a)->Encode(c.text, add_special))
          << name << ": '" << c.text << "'";
    }
    EXPECT_EQ((*b)->Encode(c.text, false), c.ids) << name << ": '" << c.text << "'";
    EXPECT_EQ((*b)->Decode(c.ids), (*a)->Decode(c.ids));
  }
  EXPECT_EQ((*b)->Encode("<s>x<|endoftext|>", true, true), (*a)->Encode("<s>x<|endoftext|>", true, true));
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerHfJsonRoundTripTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("gpt") != std::string::npos
                                      ? std::string("Gpt2")
                                      : std::string("LlamaSpm");
                         });

TEST(TokenizerHfJsonTest, ByteLevelLlama3RegexAndPairMergesAreRead) {
  const std::string path = TempPath("llama3.json");
  WriteText(path, R"({
    "added_tokens": [{"id": 5, "content": "<|begin_of_text|>", "special": true}],
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"},
      {"type": "ByteLevel", "use_regex": false}]},
    "post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"},
      {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}]},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
              "merges": [["a", "b"], ["Ġ", "ab"]]}})");
  absl::StatusOr<TokenizerSpec> spec = TokenizerSpecFromHfJson(path);
  std::remove(path.c_str());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, TokenizerSpec::Model::kByteLevelBpe);
  EXPECT_EQ(spec->pre, TokenizerSpec::PreTokenizer::kLlama3);
  EXPECT_EQ(spec->merges, (std::vector<std::string>{"a b", "Ġ ab"}));
  EXPECT_EQ(spec->bos_id, 5);
  EXPECT_TRUE(spec->add_bos);
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("ab ab", true), (std::vector<int32_t>{5, 2, 4}));
  EXPECT_EQ((*tokenizer)->Decode({5, 2, 4}), "ab ab");
}

absl::Status ReadText(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  WriteText(path, text);
  absl::Status status = TokenizerSpecFromHfJson(path).status();
  std::remove(path.c_str());
  return status;
}

TEST(TokenizerHfJsonTest, MalformedFilesAreRefusedNamingTheProblem) {
  absl::Status not_json = ReadText("bad1.json", "{\"model\": ");
  EXPECT_EQ(not_json.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_json.message().find("bad1.json"), std::string::npos) << not_json;
  EXPECT_NE(not_json.message().find("not valid JSON"), std::string::npos) << not_json;

  absl::Status no_model = ReadText("bad2.json", R"({"added_tokens": []})");
  EXPECT_EQ(no_model.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_model.message().find("'model'"), std::string::npos) << no_model;

  absl::Status unigram =
      ReadText("bad3.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  EXPECT_EQ(unigram.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unigram.message().find("Unigram"), std::string::npos) << unigram;
  EXPECT_NE(unigram.message().find("model.type"), std::string::npos) << unigram;

  absl::Status wordpiece =
      ReadText("bad4.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  EXPECT_NE(wordpiece.message().find("WordPiece"), std::string::npos) << wordpiece;

  absl::Status bad_vocab = ReadText("bad5.json", R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})");
  EXPECT_NE(bad_vocab.message().find("model.vocab"), std::string::npos) << bad_vocab;

  absl::Status odd_regex = ReadText("bad6.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\w+"}}, {"type": "ByteLevel"}]}})");
  EXPECT_NE(odd_regex.message().find("\\w+"), std::string::npos) << odd_regex;

  EXPECT_EQ(TokenizerSpecFromHfJson(TempPath("does_not_exist.json")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace crossreg
