// Structured-output constraints as a request sends them: the first byte picks GBNF,
// JSON Schema or a regular expression, the rest is its text. What compiles must give a
// grammar that parses (a converter's output that does not is a bug), prints back to
// GBNF that parses again, and matches text without crashing, CouldAcceptByte agreeing
// with AcceptByte on every byte and the forced text accepted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg::grammar;
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
    // The walk's shortcut must agree with the step it stands for.
    const bool could = matcher.CouldAcceptByte(static_cast<uint8_t>(c));
    if (matcher.AcceptByte(static_cast<uint8_t>(c)) != could) std::abort();
    if (!could) break;
  }
  (void)matcher.CanEnd();
  // Forced text is text the state accepts.
  const std::string forced = matcher.ForcedText();
  GrammarMatcher after = matcher;
  if (!after.AcceptBytes(forced)) std::abort();
  return 0;
}
