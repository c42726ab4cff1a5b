// Token masks: the vocabulary walk equals checking every token alone, in every state
// along a sentence (tokens that split characters or span symbols included); EOS only
// where the grammar may end; the cache returns the same masks; GrammarState's masked
// argmax, push and pop.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/token_mask.h"
#include "gtest/gtest.h"

namespace crossreg::grammar {
namespace {

constexpr char kJsonish[] = R"(
root   ::= "{" ws pair ("," ws pair)* ws "}"
pair   ::= "\"" [a-zé]{1,6} "\"" ws ":" ws value
value  ::= [0-9]+ | "\"" ([^"\\] | "\\" ["\\])* "\"" | "true" | "[" ws (value ("," ws value)*)? ws "]"
ws     ::= " "?
)";

// A vocabulary of single bytes, common pieces, multi-byte characters split anywhere,
// control tokens without bytes and one EOS.
std::shared_ptr<const GrammarVocabulary> TestVocabulary(int extra_random, uint32_t seed) {
  std::vector<std::string> tokens = {"", "<eos>"};  // 0: a control token, 1: EOS (its bytes are never read)
  for (int b = 1; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* piece : {"{\"", "\":", "\": ", "\",", ", \"", "true", "tru", "e}", "}", "[1", "2,", "é", "\xc3",
                            "\xa9\"", "ab", "\"ab", "é\":", "  ", "\"\"", "12", "3]", "ok\"", "\\\""}) {
    tokens.push_back(piece);
  }
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[]\":, abcdeé0123456789tru\\";
  for (int i = 0; i < extra_random; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  return std::make_shared<const GrammarVocabulary>(std::move(tokens), std::vector<int32_t>{1});
}

TEST(TokenMaskTest, TheWalkEqualsCheckingEachTokenInEveryStateOfASentence) {
  auto g = ParseGbnf(kJsonish);
  ASSERT_TRUE(g.ok()) << g.status();
  auto compiled = std::make_shared<const CompiledGrammar>(*g);
  const auto vocab = TestVocabulary(3000, 7);
  GrammarMatcher state(compiled);
  const std::string sentence = "{\"ab\": [1, \"x\\\"é\", true],\"é\":12 }";
  for (size_t i = 0; i <= sentence.size(); ++i) {
    const TokenMask mask = ComputeTokenMask(state, *vocab);
    int allowed = 0;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      ASSERT_EQ(mask.test(id), TokenAllowed(state, *vocab, id)) << "after " << i << " bytes, token " << id << " '"
                                                                  << vocab->bytes(id) << "'";
      allowed += mask.test(id);
    }
    EXPECT_EQ(mask.allowed, allowed);
    EXPECT_FALSE(mask.test(0)) << "a token without bytes is never allowed";
    EXPECT_EQ(mask.test(1), i == sentence.size()) << "EOS only where the grammar may end";
    if (i < sentence.size()) {
      ASSERT_TRUE(state.AcceptByte(static_cast<uint8_t>(sentence[i]))) << i;
    }
  }
}

TEST(TokenMaskTest, TheCacheReturnsTheComputedMaskAndCountsHits) {
  auto g = ParseGbnf(kJsonish);
  ASSERT_TRUE(g.ok());
  auto compiled = std::make_shared<const CompiledGrammar>(*g);
  const auto vocab = TestVocabulary(500, 3);
  TokenMasker masker(vocab, /*cache_bytes=*/0);  // the smallest cache: eviction is exercised
  GrammarMatcher state(compiled);
  ASSERT_TRUE(state.AcceptBytes("{\"a\":\"xyz"));
  const auto first = masker.Mask(state);
  EXPECT_EQ(first->bits, ComputeTokenMask(state, *vocab).bits);
  GrammarMatcher same(compiled);
  ASSERT_TRUE(same.AcceptBytes("{\"a\":\"xyzzzz"));  // inside the string: the same state
  EXPECT_TRUE(same == state);
  EXPECT_EQ(masker.Mask(same), first);
  EXPECT_EQ(masker.hits(), 1);
  EXPECT_EQ(masker.misses(), 1);
  // More states than the cache holds: each mask still right.
  GrammarMatcher walk(compiled);
  const std::string sentence = "{\"abcdef\": [1, 2, 3, [4, [5]], \"q\"], \"b\": true}";
  for (char c : sentence) {
    ASSERT_TRUE(walk.AcceptByte(static_cast<uint8_t>(c)));
    EXPECT_EQ(masker.Mask(walk)->bits, ComputeTokenMask(walk, *vocab).bits);
  }
}

TEST(GrammarStateTest, MaskedArgmaxPushAndPop) {
  auto vocab = TestVocabulary(0, 1);
  auto constraint = MakeGrammarConstraint(R"(root ::= "ab" "c"?)", "grammar", vocab);
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  GrammarState state(*constraint);
  auto id_of = [&](const std::string& s) {
    for (int32_t i = 0; i < vocab->size(); ++i) {
      if (vocab->bytes(i) == s) return i;
    }
    return -1;
  };
  const int n = vocab->size();
  std::vector<float> logits(static_cast<size_t>(n), 0.0f);
  logits[static_cast<size_t>(id_of("x"))] = 9.0f;   // likeliest, not allowed
  logits[static_cast<size_t>(id_of("a"))] = 1.0f;
  logits[static_cast<size_t>(id_of("ab"))] = 2.0f;  // the likeliest allowed token
  EXPECT_EQ(state.MaskedArgmax(logits.data(), n), id_of("ab"));
  // Far down the ranking (past the first candidates): the whole mask decides.
  for (int32_t i = 0; i < n; ++i) logits[static_cast<size_t>(i)] = 3.0f;
  logits[static_cast<size_t>(id_of("a"))] = -5.0f;
  logits[static_cast<size_t>(id_of("ab"))] = -6.0f;
  EXPECT_EQ(state.MaskedArgmax(logits.data(), n), id_of("a"));
  std::vector<float> masked = logits;
  state.MaskLogits(masked.data(), n);
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::isinf(masked[static_cast<size_t>(i)]), !state.Allows(i)) << i;
  }
  state.Push(id_of("ab"));
  EXPECT_TRUE(state.Allows(1)) << "EOS where the grammar may end";
  EXPECT_TRUE(state.Allows(id_of("c")));
  state.Push(id_of("c"));
  EXPECT_TRUE(state.Exhausted());
  state.Pop();
  state.Pop();
  EXPECT_FALSE(state.Allows(1));
  EXPECT_TRUE(state.Allows(id_of("a")));
  state.Push(id_of("a"));
  state.Commit();
  EXPECT_TRUE(state.Allows(id_of("b")));
  EXPECT_FALSE(state.Allows(id_of("a")));
}

}  // namespace
}  // namespace crossreg::grammar
