// Structured-output constraints as a request sends them: the first byte picks GBNF,
// JSON Schema or a regular expression, the rest is its text. What compiles must give a
// grammar that parses (a converter's output that does not is a bug), prints back to
// GBNF that parses again, and matches text without crashing, CouldAcceptByte agreeing
// with AcceptByte on every byte and the forced text accepted. Then, as a request would
// run it: the admission probe (grammar_probe.h) within its budgets, and a constrained
// generation over a small vocabulary whose every text the grammar accepts: a prefix of
// a sentence after each token, a whole sentence where it ends.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_probe.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"

namespace {

using namespace crossreg::grammar;

// Every byte, a few pieces spanning symbols and characters, and EOS (id 0).
std::shared_ptr<const GrammarVocabulary> FuzzVocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> tokens = {"<eos>"};
    for (int b = 1; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    for (const char* piece : {"{\"", "\":", "\": ", "\",", "true", "null", "ab", "aa", "12", "é", "\xc3", "\xa9\"",
                              "  ", "\n", "[1", "]}", "\\\""}) {
      tokens.push_back(piece);
    }
    return std::make_shared<const GrammarVocabulary>(tokens, std::vector<int32_t>{0});
  }();
  return vocab;
}

// Generates as a constrained request does, the input's bytes choosing among the
// allowed tokens; aborts if any text the grammar would emit is not the grammar's.
void ConstrainedGeneration(const Grammar& grammar, const uint8_t* data, size_t size) {
  auto constraint = std::make_shared<GrammarConstraint>();
  constraint->description = "fuzz";
  constraint->grammar = std::make_shared<const CompiledGrammar>(grammar);
  constraint->masker = std::make_shared<TokenMasker>(FuzzVocabulary(), size_t{1} << 20);
  if (!ProbeGrammar(*constraint).ok()) return;  // refused at admission: never generated
  const GrammarVocabulary& vocab = constraint->masker->vocab();
  GrammarState state(constraint);
  std::string text;
  for (size_t t = 0; t < 24; ++t) {
    const auto mask = state.Mask();
    if (mask == nullptr || mask->over_budget || mask->allowed == 0) return;  // the request would end with an error
    int32_t pick = static_cast<int32_t>(data[t % size]) * 7 + static_cast<int32_t>(t);
    int32_t token = -1;
    for (int32_t k = 0; k < vocab.size() && token < 0; ++k) {
      const int32_t id = (pick + k) % vocab.size();
      if (mask->test(id)) token = id;
    }
    if (token < 0) std::abort();  // the mask said some token was allowed
    if (token == 0) {
      if (!GrammarAccepts(grammar, text)) std::abort();  // EOS only on a whole sentence
      return;
    }
    state.Push(token);
    state.Commit();
    text += vocab.bytes(token);
    GrammarMatcher fresh(constraint->grammar);
    if (!fresh.AcceptBytes(text)) std::abort();  // no longer a prefix of a sentence
    if (state.Exhausted()) {
      if (!GrammarAccepts(grammar, text)) std::abort();
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view source(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string gbnf;
  switch (data[0] % 3) {
    case 0:
      gbnf = std::string(source);
      break;
    case 1: {
      auto converted = JsonSchemaToGbnf(source);
      if (!converted.ok()) return 0;
      gbnf = *converted;
      break;
    }
    default: {
      auto converted = RegexToGbnf(source, "re");
      if (!converted.ok()) return 0;
      gbnf = absl::StrCat("root ::= re\n", *converted);
      break;
    }
  }
  auto grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) {
    if (data[0] % 3 != 0) std::abort();  // a converter wrote a grammar that does not parse
    return 0;
  }
  if (!ParseGbnf(grammar->ToGbnf()).ok()) std::abort();
  GrammarMatcher matcher(std::make_shared<const CompiledGrammar>(*grammar));
  for (char c : source.substr(0, 256)) {
    // The walk's shortcut must agree with the step it stands for, except where the
    // step refuses for the state limits (grammar_budget.h), and says so.
    const bool could = matcher.CouldAcceptByte(static_cast<uint8_t>(c));
    const bool accepted = matcher.AcceptByte(static_cast<uint8_t>(c));
    if (accepted != could && !(could && matcher.hit_limit())) std::abort();
    if (!accepted) break;
  }
  (void)matcher.CanEnd();
  // Forced text is text the state accepts.
  const std::string forced = matcher.ForcedText();
  GrammarMatcher after = matcher;
  if (!after.AcceptBytes(forced)) std::abort();
  ConstrainedGeneration(*grammar, data, size);
  return 0;
}
