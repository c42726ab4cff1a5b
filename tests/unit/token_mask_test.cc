// Token masks: the vocabulary walk equals checking every token alone, in every state
// along a sentence (tokens that split characters or span symbols included); EOS only
// where the grammar may end; the cache returns the same masks; GrammarState's masked
// argmax, push and pop; CouldAcceptByte against AcceptByte; the longest token match
// and the forced text and tokens that n-gram drafting under a grammar uses.
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
    EXPECT_EQ(ComputeTokenMask(state, *vocab, /*intern_states=*/false).bits, mask.bits) << "after " << i << " bytes";
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

TEST(TokenMaskTest, CouldAcceptByteAgreesWithAcceptByteOnEveryByteInEveryState) {
  auto g = ParseGbnf(kJsonish);
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarMatcher state(std::make_shared<const CompiledGrammar>(*g));
  const std::string sentence = "{\"ab\": [1, \"x\\\"é\", true],\"é\":12 }";
  for (size_t i = 0; i <= sentence.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      GrammarMatcher probe = state;
      ASSERT_EQ(state.CouldAcceptByte(static_cast<uint8_t>(b)), probe.AcceptByte(static_cast<uint8_t>(b)))
          << "after " << i << " bytes, byte " << b;
    }
    if (i < sentence.size()) {
      ASSERT_TRUE(state.AcceptByte(static_cast<uint8_t>(sentence[i])));
    }
  }
}

TEST(TokenMaskTest, LongestMatchIsTheLongestTokenThatBeginsTheText) {
  const auto vocab = TestVocabulary(2000, 11);
  for (const std::string text : {"{\"ab\": 1", "true}", "\xc3\xa9\":", "zzz", "", "3]x", "\": 12"}) {
    size_t want_length = 0;
    int32_t want = -1;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const std::string& b = vocab->bytes(id);
      if (b.empty() || vocab->is_eos(id) || b.size() > text.size() || text.compare(0, b.size(), b) != 0) continue;
      if (b.size() > want_length) {
        want_length = b.size();
        want = id;
      }
    }
    size_t length = 99;
    EXPECT_EQ(vocab->LongestMatch(text, &length), want) << text;
    EXPECT_EQ(length, want_length) << text;
  }
}

TEST(GrammarStateTest, ForcedTextAndItsTokens) {
  std::vector<std::string> tokens = {"<eos>", "{\"", "name", "\":", "\"", "n", "a", "m", "e", ":", "{", "x", "é"};
  auto vocab = std::make_shared<const GrammarVocabulary>(tokens, std::vector<int32_t>{0});
  auto constraint = MakeGrammarConstraint(R"(root ::= "{\"name\":" [a-z]+ "é!"? )", "grammar", vocab);
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  GrammarState state(*constraint);
  EXPECT_EQ(state.ForcedTokens(8), (std::vector<int32_t>{1, 2, 3}));  // {" name ":
  EXPECT_EQ(state.ForcedTokens(2), (std::vector<int32_t>{1, 2}));
  GrammarMatcher start((*constraint)->grammar);
  EXPECT_EQ(start.ForcedText(), "{\"name\":");
  // A code point is added while 4 more bytes (the longest character) fit.
  EXPECT_EQ(start.ForcedText(5), "{\"");
  EXPECT_EQ(start.ForcedText(3), "");
  state.Push(1);
  state.Push(2);
  state.Push(3);
  EXPECT_TRUE(state.ForcedTokens(8).empty()) << "a letter is a choice";
  state.Push(11);
  EXPECT_TRUE(state.ForcedTokens(8).empty()) << "more letters, \"é!\" or the end";
  state.Push(12);
  EXPECT_TRUE(state.ForcedTokens(8).empty()) << "'!' is forced but no token spells it";
  GrammarMatcher mid((*constraint)->grammar);
  ASSERT_TRUE(mid.AcceptBytes("{\"name\":x\xc3"));
  EXPECT_EQ(mid.ForcedText(), "") << "inside a character";
  ASSERT_TRUE(mid.AcceptBytes("\xa9"));
  EXPECT_EQ(mid.ForcedText(), "!");
}

TEST(GrammarStateTest, ForcedTokensFollowTheSpellingTheModelChose) {
  std::vector<std::string> tokens = {"<eos>", "{\"", "name", "\":", "\"", "n", "a", "m", "e", ":", "{", "na", "me\":"};
  auto vocab = std::make_shared<const GrammarVocabulary>(tokens, std::vector<int32_t>{0});
  auto constraint = MakeGrammarConstraint(R"(root ::= "{\"name\":" [a-z]+)", "grammar", vocab);
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  GrammarState state(*constraint);
  EXPECT_EQ(state.ForcedTokens(8), (std::vector<int32_t>{1, 2, 3}));  // longest matches: {" name ":
  // A request commits { " na me": instead; later drafts of the same text follow it.
  GrammarState first(*constraint);
  for (int32_t t : {10, 4, 11, 12}) {
    first.LearnSpelling(t);
    first.Push(t);
  }
  first.Commit();
  EXPECT_EQ(state.ForcedTokens(8), (std::vector<int32_t>{10, 4, 11, 12}));
  EXPECT_EQ(state.ForcedTokens(2), (std::vector<int32_t>{10, 4}));
  state.Push(1);  // {" : from here the text is name": and its learned spelling na me":
  EXPECT_EQ(state.ForcedTokens(8), (std::vector<int32_t>{11, 12}));
  // Nothing is learned where the model has a choice.
  GrammarState other(*constraint);
  for (int32_t t : {1, 2, 3}) other.Push(t);
  other.LearnSpelling(5);
  EXPECT_TRUE(other.ForcedTokens(8).empty());
}

}  // namespace
}  // namespace crossreg::grammar
