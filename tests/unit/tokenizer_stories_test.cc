// The stories260K vocab (inside its GGUF) against llama2.c's own prompt encodings.
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tokenizer_test_vectors.h"

namespace crossreg {
namespace {

using testing::LoadGgufTokenizerSpec;
using testing::ReadWholeFile;
using testing::Stories260KGguf;
using testing::Stories260KReference;

TEST(TokenizerStoriesTest, PromptsEncodeLikeLlama2c) {
  absl::StatusOr<TokenizerSpec> spec = LoadGgufTokenizerSpec(Stories260KGguf());
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 512);
  EXPECT_EQ((*tokenizer)->bos_id(), 1);
  EXPECT_EQ((*tokenizer)->eos_id(), 2);

  const auto reference = nlohmann::json::parse(ReadWholeFile(Stories260KReference()), nullptr, false);
  ASSERT_TRUE(reference.is_array() && !reference.empty());
  for (const auto& entry : reference) {
    const std::string prompt = entry["prompt"].get<std::string>();
    const auto expected = entry["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = (*tokenizer)->Encode(prompt, /*add_special=*/true);
    EXPECT_EQ(ids, expected) << "'" << prompt << "'";
    EXPECT_EQ((*tokenizer)->Decode(ids), prompt);

    // Generated stories decode to readable text: ASCII letters and punctuation.
    const auto greedy = entry["greedy_ids"].get<std::vector<int32_t>>();
    const std::string story = (*tokenizer)->Decode(greedy);
    EXPECT_GT(story.size(), 20u);
    int letters = 0;
    for (char c : story) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    EXPECT_GT(letters * 2, static_cast<int>(story.size())) << story;
    EXPECT_NE(story.find(' '), std::string::npos) << story;
  }
  // The first story continues "Once upon a time".
  const std::string first = (*tokenizer)->Decode(reference[0]["prompt_ids"].get<std::vector<int32_t>>()) +
                            (*tokenizer)->Decode(reference[0]["greedy_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(first.rfind("Once upon a time", 0), 0u) << first;
}

}  // namespace
}  // namespace crossreg
