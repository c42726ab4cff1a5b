// Pre-tokenizer regexes, special-token matching and spec errors, on small cases.
#include <string>

#include "engine/io/gguf_file.h"
#include "engine/tokenizer/pretokenizer_regex.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer_test_vectors.h"

namespace crossreg {
namespace {

using Pre = TokenizerSpec::PreTokenizer;
using testing::LoadGgufTokenizerSpec;
using testing::TokenizerTestData;

std::vector<std::string> Words(Pre kind, std::string_view text) {
  auto regex = PretokenizerRegex::Create(PretokenizerPattern(kind));
  EXPECT_TRUE(regex.ok()) << regex.status();
  std::vector<std::string> words;
  for (std::string_view w : (*regex)->Split(text)) words.emplace_back(w);
  return words;
}

TEST(TokenizerPretokenizerTest, DigitsFollowEachFamily) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Words(Pre::kGpt2, "abc 12345"), (V{"abc", " 12345"}));
  EXPECT_EQ(Words(Pre::kLlama3, "abc 12345"), (V{"abc", " ", "123", "45"}));
  EXPECT_EQ(Words(Pre::kQwen2, "abc 12345"), (V{"abc", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(Words(Pre::kLlama3, "I'M here\n\n"), (V{"I", "'M", " here", "\n\n"}));
  EXPECT_EQ(Words(Pre::kGpt2, "a  b"), (V{"a", " ", " b"}));
}

TEST(TokenizerPretokenizerTest, InvalidUtf8IsKeptNotDropped) {
  const std::string text = "ab\xFF\xC3 cd";
  std::string joined;
  for (const std::string& w : Words(Pre::kGpt2, text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(TokenizerSpecialTokensTest, ByteLevelControlTokensNeedParseSpecial) {
  auto spec = LoadGgufTokenizerSpec(TokenizerTestData("ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->add_bos);
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok());
  const std::string text = "Hi<|endoftext|>";
  const auto parsed = (*tokenizer)->Encode(text, false, /*parse_special=*/true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.back(), 50256);
  const auto literal = (*tokenizer)->Encode(text, false, /*parse_special=*/false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 50256), 0);
  EXPECT_EQ((*tokenizer)->Decode(literal), text);
  EXPECT_EQ((*tokenizer)->Decode(parsed), "Hi");  // control tokens decode to nothing
  // Invalid UTF-8 survives byte-level BPE.
  const std::string bad = "x\xFF\xFEy";
  EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode(bad, false)), bad);
}

TEST(TokenizerSpecialTokensTest, SpmUserDefinedTokensAlwaysMatchControlOnlyWhenAsked) {
  auto spec = LoadGgufTokenizerSpec(TokenizerTestData("ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok());
  // "</s>" is user-defined (type 4) in Phi-3: matched whole even without parse_special.
  const auto ids = (*tokenizer)->Encode("a</s>", false, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 2);
  // "<|user|>" is a control token.
  const auto parsed = (*tokenizer)->Encode("<|user|>\nHi", true, true);
  ASSERT_GE(parsed.size(), 2u);
  EXPECT_EQ(parsed[0], 1);
  EXPECT_EQ(parsed[1], 32010);
  const auto literal = (*tokenizer)->Encode("<|user|>", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 32010), 0);
}

TEST(TokenizerSpecTest, BadSpecsAndGgufMetadataAreRefused) {
  TokenizerSpec empty;
  EXPECT_EQ(Tokenizer::Create(empty).status().code(), absl::StatusCode::kInvalidArgument);
  TokenizerSpec bad_bos;
  bad_bos.tokens = {"a", "b"};
  bad_bos.bos_id = 7;
  EXPECT_EQ(Tokenizer::Create(bad_bos).status().code(), absl::StatusCode::kInvalidArgument);
  TokenizerSpec bad_merge;
  bad_merge.model = TokenizerSpec::Model::kByteLevelBpe;
  bad_merge.tokens = {"a", "b"};
  bad_merge.merges = {"ab"};
  EXPECT_EQ(Tokenizer::Create(bad_merge).status().code(), absl::StatusCode::kInvalidArgument);

  GgufMetadata metadata;
  EXPECT_FALSE(TokenizerSpecFromGguf(metadata).ok());  // no tokenizer.ggml.model
  GgufValue model;
  model.kind = GgufValue::Kind::kString;
  model.gguf_type = 8;
  model.s = "bert";
  metadata.mutable_values()["tokenizer.ggml.model"] = model;
  absl::Status status = TokenizerSpecFromGguf(metadata).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bert"), std::string::npos) << status;
}

}  // namespace
}  // namespace crossreg
