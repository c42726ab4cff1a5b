// StreamDecoder: never emits part of a UTF-8 character; pieces add up to Decode.
#include <string>

#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer_test_vectors.h"

namespace crossreg {
namespace {

using testing::LoadGgufTokenizerSpec;
using testing::LoadTokenizerTestCases;
using testing::TokenizerTestData;

std::unique_ptr<Tokenizer> Load(const std::string& name) {
  absl::StatusOr<TokenizerSpec> spec = LoadGgufTokenizerSpec(TokenizerTestData(name));
  if (!spec.ok()) return nullptr;
  auto tokenizer = Tokenizer::Create(*spec);
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

// Streams `ids` one at a time; checks every piece is valid UTF-8 and the total matches.
void ExpectStreamsLikeDecode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamDecoder decoder(tokenizer);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = decoder.Push(id);
    EXPECT_TRUE(utf8::IsValid(piece)) << "id " << id;
    streamed += piece;
  }
  streamed += decoder.Flush();
  EXPECT_EQ(streamed, tokenizer.Decode(ids));
}

class TokenizerStreamDecoderTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerStreamDecoderTest, EmojiAndCjkSplitOverTokensStreamWhole) {
  std::unique_ptr<Tokenizer> tokenizer = Load(GetParam());
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = "Llama 🦙 says 你好世界, 😶‍🌫️ and ✅ — done";
  const std::vector<int32_t> ids = tokenizer->Encode(text, /*add_special=*/true);
  // Some character really is split across tokens (byte fallback / byte-level pieces).
  bool split_character = false;
  for (int32_t id : ids) split_character |= !utf8::IsValid(tokenizer->TokenBytes(id));
  EXPECT_TRUE(split_character);
  ExpectStreamsLikeDecode(*tokenizer, ids);
  EXPECT_EQ(tokenizer->Decode(ids), text);
}

TEST_P(TokenizerStreamDecoderTest, AllTestStringsStreamLikeDecode) {
  std::unique_ptr<Tokenizer> tokenizer = Load(GetParam());
  ASSERT_NE(tokenizer, nullptr);
  for (const auto& c : LoadTokenizerTestCases(GetParam())) {
    ExpectStreamsLikeDecode(*tokenizer, c.ids);
    ExpectStreamsLikeDecode(*tokenizer, tokenizer->Encode(c.text, true));
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerStreamDecoderTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).find("gpt") != std::string::npos
                                      ? std::string("Gpt2")
                                      : std::string("LlamaSpm");
                         });

TEST(TokenizerStreamDecoderBytesTest, HoldsIncompleteAndReplacesInvalidBytes) {
  std::unique_ptr<Tokenizer> tokenizer = Load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tokenizer, nullptr);
  const int32_t byte0 = 3;  // "<0x00>"; byte b is id 3 + b
  StreamDecoder decoder(*tokenizer);
  // "€" = E2 82 AC arrives one byte token at a time.
  EXPECT_EQ(decoder.Push(byte0 + 0xE2), "");
  EXPECT_EQ(decoder.Push(byte0 + 0x82), "");
  EXPECT_EQ(decoder.Push(byte0 + 0xAC), "€");
  // A stray continuation byte can never complete: replaced at once.
  EXPECT_EQ(decoder.Push(byte0 + 0x80), "\xEF\xBF\xBD");
  // An unfinished character at the end is replaced by Flush.
  EXPECT_EQ(decoder.Push(byte0 + 0xF0), "");
  EXPECT_EQ(decoder.Push(byte0 + 0x9F), "");
  EXPECT_EQ(decoder.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.Flush(), "");
}

TEST(TokenizerStreamDecoderBytesTest, DropsTheSpacePrefixOnlyAtTheStart) {
  std::unique_ptr<Tokenizer> tokenizer = Load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int32_t> ids = tokenizer->Encode("Hello world", /*add_special=*/true);
  ASSERT_EQ(ids.front(), tokenizer->bos_id());
  StreamDecoder decoder(*tokenizer);
  std::string text;
  for (int32_t id : ids) text += decoder.Push(id);
  EXPECT_EQ(text + decoder.Flush(), "Hello world");
}

TEST(TokenizerStreamDecoderBytesTest, ContinuationKeepsItsLeadingSpace) {
  std::unique_ptr<Tokenizer> tokenizer = Load("ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<int32_t> prompt = tokenizer->Encode("The little", true);
  const std::vector<int32_t> all = tokenizer->Encode("The little dog", true);
  ASSERT_GT(all.size(), prompt.size());
  StreamDecoder decoder(*tokenizer);
  decoder.ContinueSequence();
  std::string text;
  for (size_t i = prompt.size(); i < all.size(); ++i) text += decoder.Push(all[i]);
  EXPECT_EQ(text + decoder.Flush(), " dog");
}

}  // namespace
}  // namespace crossreg
