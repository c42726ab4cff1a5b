// Whatever a constrained request emits is the grammar's: for every grammar of the test
// corpus the compiler accepts (the JSON schemas of tests/testdata/json_schemas, any JSON
// object, the GBNF and regular-expression seeds of fuzz/corpus/fuzz_grammar, some of
// which are refused at admission as too costly, and a few more), random
// generations over the default model's vocabulary, each token drawn among those the
// mask allows, keep the text a prefix of a sentence at every token, and end (EOS)
// only on a whole sentence. The fuzzer (fuzz/fuzz_grammar.cc) checks the same on the
// grammars it makes up.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar/grammar_compiler.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"

namespace crossreg::grammar {
namespace {

const std::filesystem::path kRepo = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Source {
  std::string name;
  ConstraintKind kind;
  std::string text;
};

std::vector<Source> Corpus() {
  std::vector<Source> out;
  for (const auto& entry : std::filesystem::directory_iterator(kRepo / "tests/testdata/json_schemas")) {
    out.push_back({entry.path().filename().string(), ConstraintKind::kJsonSchema, Read(entry.path())});
  }
  out.push_back({"json_object", ConstraintKind::kJsonObject, ""});
  // The grammar fuzzer's seeds: the first byte picks the kind (fuzz/fuzz_grammar.cc).
  for (const auto& entry : std::filesystem::directory_iterator(kRepo / "fuzz/corpus/fuzz_grammar")) {
    const std::string data = Read(entry.path());
    if (data.empty()) continue;
    const ConstraintKind kinds[] = {ConstraintKind::kGbnf, ConstraintKind::kJsonSchema, ConstraintKind::kRegex};
    out.push_back({entry.path().filename().string(), kinds[static_cast<uint8_t>(data[0]) % 3], data.substr(1)});
  }
  out.push_back({"arithmetic", ConstraintKind::kGbnf,
                 "root ::= expr\nexpr ::= term ([+-] term)*\nterm ::= num | \"(\" expr \")\"\nnum ::= [0-9]{1,4}"});
  out.push_back({"list", ConstraintKind::kGbnf, R"(root ::= "- " [A-Za-z ]{1,20} ("\n- " [A-Za-z ]{1,20}){0,4})"});
  out.push_back({"email", ConstraintKind::kRegex, "[a-z0-9._]{1,16}@[a-z]{2,10}\\.(com|org|net)"});
  out.push_back({"date", ConstraintKind::kRegex, "(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"});
  out.push_back({"unicode", ConstraintKind::kGbnf, R"(root ::= "«" [à-ÿ]{1,5} "»" " ✓"?)"});
  return out;
}

TEST(GrammarOutputTest, EveryEmittedTextIsAcceptedByTheGrammar) {
  auto spec = TokenizerSpecFromHfJson((kRepo / "models/default/tokenizer.json").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto tokenizer = Tokenizer::Create(*spec);
  ASSERT_TRUE(tokenizer.ok());
  const int32_t eos = (*tokenizer)->eos_id();
  GrammarCompiler compiler(VocabularyOf(**tokenizer, {eos}));
  const GrammarVocabulary& vocab = *compiler.vocab();
  int generations = 0, ended = 0, refused = 0;
  for (const Source& source : Corpus()) {
    SCOPED_TRACE(source.name);
    auto constraint = compiler.Compile(source.kind, source.text);
    if (!constraint.ok()) {
      // The fuzzer's seeds include grammars made to exceed the budgets: refused by name,
      // never generated from.
      EXPECT_EQ(constraint.status().code(), absl::StatusCode::kInvalidArgument) << constraint.status();
      ++refused;
      continue;
    }
    std::mt19937 rng(7);
    for (int walk = 0; walk < 12; ++walk, ++generations) {
      GrammarState state(*constraint);
      std::string text;
      for (int t = 0; t < 64; ++t) {
        const auto mask = state.Mask();
        ASSERT_NE(mask, nullptr);
        ASSERT_FALSE(mask->over_budget);
        if (mask->allowed == 0) break;  // the grammar's text is complete and nothing may follow
        // A random allowed token, EOS less often so that texts grow.
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab.size(); ++id) {
          if (mask->test(id)) allowed.push_back(id);
        }
        int32_t token = allowed[rng() % allowed.size()];
        if (token == eos && allowed.size() > 1 && rng() % 4 != 0) token = allowed[(rng() % (allowed.size() - 1) + 1) % allowed.size()];
        if (token == eos) {
          EXPECT_TRUE(GrammarAccepts((*constraint)->grammar->grammar(), text)) << "ended on \"" << text << "\"";
          ++ended;
          break;
        }
        state.Push(token);
        state.Commit();
        text += vocab.bytes(token);
        GrammarMatcher fresh((*constraint)->grammar);
        ASSERT_TRUE(fresh.AcceptBytes(text)) << "\"" << text << "\" is no prefix of a sentence";
        if (state.Exhausted()) {
          EXPECT_TRUE(GrammarAccepts((*constraint)->grammar->grammar(), text)) << "\"" << text << "\"";
          ++ended;
          break;
        }
      }
    }
  }
  std::printf("[ figures  ] %d constrained generations, %d ended on a whole sentence; %d grammars refused at admission\n",
              generations, ended, refused);
  EXPECT_GT(ended, generations / 4);
  EXPECT_GE(generations, 12 * 20);
}

}  // namespace
}  // namespace crossreg::grammar
