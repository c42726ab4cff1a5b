// llama.cpp's tokenizer test vectors, encoded the way its test-tokenizer-0 does:
// no BOS (add_special = false), special tokens not parsed; SPM still adds its space prefix.
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/tokenizer_test_vectors.h"

namespace crossreg {
namespace {

using testing::LoadGgufTokenizerSpec;
using testing::LoadTokenizerTestCases;
using testing::TokenizerTestData;

struct VocabCase {
  const char* name;
  TokenizerSpec::Model model;
  bool lossless;       // what lossless() reports
  bool round_trips;    // Decode(Encode(s)) == s for every test string
};

class TokenizerGgufVocabTest : public ::testing::TestWithParam<VocabCase> {};

TEST_P(TokenizerGgufVocabTest, EncodesEveryTestStringExactly) {
  const VocabCase& vocab = GetParam();
  absl::StatusOr<TokenizerSpec> spec = LoadGgufTokenizerSpec(TokenizerTestData(vocab.name));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model, vocab.model);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

  const auto cases = LoadTokenizerTestCases(vocab.name);
  ASSERT_EQ(cases.size(), 46u);
  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> ids = (*tokenizer)->Encode(cases[i].text, /*add_special=*/false);
    EXPECT_EQ(ids, cases[i].ids) << vocab.name << " string " << i << ": '" << cases[i].text << "'";
    if (ids == cases[i].ids) ++matched;
  }
  EXPECT_EQ(matched, static_cast<int>(cases.size())) << vocab.name;
}

TEST_P(TokenizerGgufVocabTest, DecodeInvertsEncode) {
  const VocabCase& vocab = GetParam();
  absl::StatusOr<TokenizerSpec> spec = LoadGgufTokenizerSpec(TokenizerTestData(vocab.name));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->lossless(), vocab.lossless);
  if (!vocab.round_trips) GTEST_SKIP() << vocab.name << " does not round-trip";
  for (const auto& c : LoadTokenizerTestCases(vocab.name)) {
    EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode(c.text, false)), c.text);
    // With BOS too: the decoder drops BOS and the space prefix after it.
    EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode(c.text, true)), c.text);
  }
}

// SPM vocabs report lossless() == false only because a literal U+2581 in the input
// decodes as a space; none of the test strings contains one, so all of them round-trip.
INSTANTIATE_TEST_SUITE_P(
    Vocabs, TokenizerGgufVocabTest,
    ::testing::Values(
        VocabCase{"ggml-vocab-llama-spm.gguf", TokenizerSpec::Model::kSentencePieceBpe, false, true},
        VocabCase{"ggml-vocab-phi-3.gguf", TokenizerSpec::Model::kSentencePieceBpe, false, true},
        VocabCase{"ggml-vocab-gpt-2.gguf", TokenizerSpec::Model::kByteLevelBpe, true, true}),
    [](const ::testing::TestParamInfo<VocabCase>& info) {
      std::string name = info.param.name;
      std::string out;
      for (char c : name.substr(0, name.find(".gguf"))) {
        if (std::isalnum(static_cast<unsigned char>(c))) out.push_back(c);
      }
      return out;
    });

}  // namespace
}  // namespace crossreg
