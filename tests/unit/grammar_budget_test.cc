// Grammar budgets (engine/grammar/grammar_budget.h): what a request's grammar may cost
// is bounded, and a grammar that would exceed it is refused at admission with the
// construct named, in every front end (GBNF, regex, JSON Schema patterns); surrogates
// are refused as in regex; a matcher state that reaches a limit admits less than its
// grammar, never more, and a mask agrees with AcceptBytes token by token even there; a
// mask computation stops at its work budget.
#include <pthread.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_budget.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/token_mask.h"
#include "gtest/gtest.h"

namespace crossreg::grammar {
namespace {

// Single bytes, letter pairs and a few words, and one EOS.
std::shared_ptr<const GrammarVocabulary> Vocabulary() {
  std::vector<std::string> tokens = {"<eos>"};
  for (int b = 1; b < 128; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (char a = 'a'; a <= 'z'; ++a) tokens.push_back(std::string(2, a));
  for (const char* w : {"aaaa", "abc", "{\"", "\":", "é", "\xc3", "\xa9"}) tokens.push_back(w);
  return std::make_shared<const GrammarVocabulary>(tokens, std::vector<int32_t>{0});
}

absl::Status Compile(ConstraintKind kind, const std::string& source) {
  GrammarCompiler compiler(Vocabulary());
  return compiler.Compile(kind, source).status();
}

TEST(GrammarBudgetTest, SurrogatesAreNotCharactersInGbnfEither) {
  for (const char* gbnf : {R"(root ::= "\uD800" "yes")", R"(root ::= "\uDC00" [0-9]+)", R"(root ::= [\uD800-\uDBFF])",
                           R"(root ::= "\U0000DFFF")"}) {
    const absl::Status s = Compile(ConstraintKind::kGbnf, gbnf);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << gbnf;
    EXPECT_TRUE(absl::StrContains(s.message(), "is a surrogate")) << gbnf << ": " << s;
  }
  // Encoded surrogates, overlong forms and points past U+10FFFF in the text itself.
  for (const char* raw : {"root ::= \"\xed\xa0\x80\"", "root ::= \"\xc0\xaf\"", "root ::= \"\xf4\x90\x80\x80\""}) {
    const absl::Status s = Compile(ConstraintKind::kGbnf, raw);
    EXPECT_TRUE(absl::StrContains(s.message(), "not valid UTF-8")) << s;
  }
  // A class spanning the surrogates is fine: its characters are the others.
  EXPECT_TRUE(Compile(ConstraintKind::kGbnf, R"(root ::= [\u0020-\uFFFF]+)").ok());
}

TEST(GrammarBudgetTest, AmbiguousRepetitionIsRefusedAtAdmissionNamingTheConstruct) {
  struct Case {
    ConstraintKind kind;
    std::string source;
    std::string named;
  };
  std::string twenty = "[a-z]";
  for (int i = 0; i < 20; ++i) twenty = absl::StrCat("(", twenty, "){0,3}");
  const std::vector<Case> cases = {
      {ConstraintKind::kGbnf, R"(root ::= (([a-z]){0,1000}){0,1000} "!")", "`(([a-z]){0,1000}){0,1000}`"},
      {ConstraintKind::kGbnf, R"(root ::= ([a-z]{1,100}){1,100} "!")", "`([a-z]{1,100}){1,100}`"},
      {ConstraintKind::kGbnf, absl::StrCat("root ::= ", twenty, " \"!\""), "too ambiguous"},
      {ConstraintKind::kRegex, "(([a-z]){0,1000}){0,1000}!", "{0,1000}"},
      {ConstraintKind::kJsonSchema, R"({"type": "string", "pattern": "^(([a-z]){0,1000}){0,1000}$"})", "{0,1000}"},
  };
  for (const Case& c : cases) {
    const absl::Status s = Compile(c.kind, c.source);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.source << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "too ambiguous")) << c.source << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.named)) << c.source << ": " << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), ConstraintKindName(c.kind))) << s;
  }
  // Wide but unambiguous: an alternation of hundreds of strings, a loop over one.
  std::string words = R"({"enum": [)";
  for (int i = 0; i < 800; ++i) absl::StrAppend(&words, i ? "," : "", "\"w", i * 7919 % 100000, "\"");
  EXPECT_TRUE(Compile(ConstraintKind::kJsonSchema, words + "]}").ok());
  std::string loop = "(";
  for (int i = 0; i < 300; ++i) loop += "a?b?";
  EXPECT_TRUE(Compile(ConstraintKind::kRegex, loop + ")*c").ok());
  EXPECT_TRUE(Compile(ConstraintKind::kGbnf, R"(root ::= ([a-z]{1,10}){1,10} "!")").ok());
}

TEST(GrammarBudgetTest, ExpansionAndStartAreBounded) {
  // 300 elements repeated 1000 times: past kMaxGrammarElements.
  const std::string wide = absl::StrCat(R"(root ::= ")", std::string(300, 'a'), R"("{1000})");
  auto parsed = ParseGbnf(wide);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kResourceExhausted);
  const absl::Status s = Compile(ConstraintKind::kGbnf, wide);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "expands to more than")) << s;
  std::string counts;  // 2.1 KB of regex, 300,000 elements
  for (int i = 0; i < 300; ++i) counts += "a{1000}";
  const absl::Status regex = Compile(ConstraintKind::kRegex, counts);
  EXPECT_EQ(regex.code(), absl::StatusCode::kInvalidArgument) << regex;
  EXPECT_TRUE(absl::StartsWith(regex.message(), "regex: ")) << regex;
  // No token can begin what the grammar requires.
  const absl::Status start = Compile(ConstraintKind::kGbnf, R"(root ::= "\u4e2d")");
  EXPECT_TRUE(absl::StrContains(start.message(), "no token of the model's vocabulary can begin")) << start;
}

TEST(GrammarBudgetTest, AStateAtTheLimitAdmitsLessNeverMoreAndItsMaskAgreesWithAccept) {
  // Built without the admission probe: ambiguity that reaches the stack limit after a
  // few dozen letters.
  auto constraint = MakeGrammarConstraint(R"(root ::= ([a-z]{1,100}){1,100} "!")", "grammar", Vocabulary());
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  const GrammarVocabulary& vocab = (*constraint)->masker->vocab();
  GrammarMatcher state((*constraint)->grammar);
  int letters = 0;
  while (true) {
    GrammarMatcher next = state;
    if (!next.AcceptBytes("a")) {
      EXPECT_TRUE(next.hit_limit());
      break;
    }
    state = next;
    ASSERT_LT(++letters, 200);
  }
  EXPECT_GT(letters, 10);
  EXPECT_LE(state.stacks(), kMaxParseStacks);
  const TokenMask mask = ComputeTokenMask(state, vocab);
  EXPECT_TRUE(mask.hit_limit);
  int32_t aaaa = -1;
  for (int32_t id = 0; id < vocab.size(); ++id) aaaa = vocab.bytes(id) == "aaaa" ? id : aaaa;
  ASSERT_GE(aaaa, 0);
  EXPECT_FALSE(mask.test(aaaa));
  for (int32_t id = 1; id < vocab.size(); ++id) {
    GrammarMatcher probe = state;
    EXPECT_EQ(mask.test(id), probe.AcceptBytes(vocab.bytes(id))) << "token " << id << " \"" << vocab.bytes(id) << "\"";
  }
  // "!" still ends it: the grammar admits less, and what it admits is its own.
  GrammarMatcher end = state;
  EXPECT_TRUE(end.AcceptBytes("!"));
  EXPECT_TRUE(end.CanEnd());
}

TEST(GrammarBudgetTest, AMaskStopsAtItsWorkBudgetAndAPartialBudgetCachesNothing) {
  auto constraint = MakeGrammarConstraint(R"(root ::= ([a-z]{1,10}){1,10} "!")", "grammar", Vocabulary());
  ASSERT_TRUE(constraint.ok());
  GrammarMatcher start((*constraint)->grammar);
  MaskWork tiny{.budget = 10};
  EXPECT_FALSE(ComputeTokenMask(start, (*constraint)->masker->vocab(), tiny).has_value());
  EXPECT_GT(tiny.used, tiny.budget);
  TokenMasker& masker = *(*constraint)->masker;
  MaskWork partial{.budget = 10};
  EXPECT_EQ(masker.Mask(start, &partial), nullptr);
  EXPECT_EQ(masker.Cached(start), nullptr);
  MaskWork enough{.budget = kMaxMaskWork};
  ASSERT_NE(masker.Mask(start, &enough), nullptr);
  EXPECT_NE(masker.Cached(start), nullptr);
}


// Runs `body` on a thread whose stack is `bytes` long.
void RunWithStack(size_t bytes, const std::function<void()>& body) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  auto trampoline = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, trampoline, const_cast<std::function<void()>*>(&body)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// A chain of rules that consume nothing until the last one is as deep as the grammar is
// long: checking it for left recursion and expanding the start state must not recurse
// per rule. Run on a thread with a 512 KiB stack (many server threads have no more),
// where a frame per rule overflows long before 60,000 rules.
TEST(GrammarBudgetTest, LongChainsOfRulesNeedNoStackPerRule) {
  constexpr int kRules = 60000;
  std::string chain = "root ::= r0\n";
  for (int i = 0; i + 1 < kRules; ++i) absl::StrAppend(&chain, "r", i, " ::= r", i + 1, " | \"b\"\n");
  std::string cyclic = chain;
  absl::StrAppend(&chain, "r", kRules - 1, " ::= \"a\"\n");
  absl::StrAppend(&cyclic, "r", kRules - 1, " ::= r0\n");  // the last reaches the first at its left edge
  absl::Status chain_status, cyclic_status;
  RunWithStack(512 << 10, [&] {
    chain_status = Compile(ConstraintKind::kGbnf, chain);
    cyclic_status = Compile(ConstraintKind::kGbnf, cyclic);
  });
  // Admitted, or refused by a budget; answered either way.
  EXPECT_TRUE(chain_status.ok() || absl::StrContains(chain_status.message(), "more than")) << chain_status;
  EXPECT_EQ(cyclic_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(cyclic_status.message(), "left-recursive")) << cyclic_status;
}

}  // namespace
}  // namespace crossreg::grammar
