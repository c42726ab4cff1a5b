#include "engine/grammar/grammar_compiler.h"

#include "absl/strings/str_cat.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_probe.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"

namespace crossreg::grammar {

const char* ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kGbnf:
      return "grammar";
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kRegex:
      return "regex";
  }
  return "?";
}

std::shared_ptr<const GrammarVocabulary> VocabularyOf(const Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) bytes[static_cast<size_t>(id)] = tokenizer.TokenBytes(id);
  return std::make_shared<const GrammarVocabulary>(std::move(bytes), eos_ids);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const GrammarVocabulary> vocab, size_t max_constraints,
                                 size_t masks_bytes)
    : vocab_(std::move(vocab)), max_constraints_(std::max<size_t>(1, max_constraints)), masks_bytes_(masks_bytes) {}

absl::StatusOr<std::shared_ptr<const GrammarConstraint>> GrammarCompiler::Compile(ConstraintKind kind,
                                                                                 std::string_view source) {
  std::string key = absl::StrCat(ConstraintKindName(kind), ":", std::string(source));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = compiled_.begin(); it != compiled_.end(); ++it) {
      if (it->first == key) {
        compiled_.splice(compiled_.begin(), compiled_, it);
        return compiled_.front().second;
      }
    }
  }
  std::string gbnf;
  switch (kind) {
    case ConstraintKind::kGbnf:
      gbnf = std::string(source);
      break;
    case ConstraintKind::kJsonSchema: {
      auto converted = JsonSchemaToGbnf(source);
      if (!converted.ok()) return converted.status();
      gbnf = *std::move(converted);
      break;
    }
    case ConstraintKind::kJsonObject:
      gbnf = JsonObjectGbnf();
      break;
    case ConstraintKind::kRegex: {
      auto converted = RegexToGbnf(source, "re");
      if (!converted.ok()) return converted.status();
      gbnf = absl::StrCat("root ::= re\n", *converted);
      break;
    }
  }
  auto parsed = ParseGbnf(gbnf);
  if (!parsed.ok() && parsed.status().code() == absl::StatusCode::kResourceExhausted) {
    // A size limit: the client's ask, in any of the kinds.
    absl::string_view message = parsed.status().message();
    if (kind != ConstraintKind::kGbnf && message.substr(0, 9) == "grammar: ") message.remove_prefix(9);
    return absl::InvalidArgumentError(
        kind == ConstraintKind::kGbnf ? std::string(message) : absl::StrCat(ConstraintKindName(kind), ": ", message));
  }
  if (!parsed.ok()) {
    if (kind == ConstraintKind::kGbnf) return parsed.status();  // "grammar: line .., column ..: ..."
    // A converter's output that does not parse is this server's bug, not the request's.
    return absl::InternalError(absl::StrCat(ConstraintKindName(kind), ": the grammar made from it does not parse (",
                                            parsed.status().message(), ")"));
  }
  auto constraint = std::make_shared<GrammarConstraint>();
  constraint->description = ConstraintKindName(kind);
  constraint->grammar = std::make_shared<const CompiledGrammar>(*std::move(parsed));
  constraint->masker = std::make_shared<TokenMasker>(vocab_, masks_bytes_);
  // Refused now if it would exceed its budgets later (and the start's mask is cached).
  if (absl::Status probe = ProbeGrammar(*constraint); !probe.ok()) {
    if (kind == ConstraintKind::kGbnf) return probe;
    // "grammar: ..." -> "regex: ..." / "json_schema: ...": the field the client wrote.
    absl::string_view message = probe.message();
    if (message.substr(0, 9) == "grammar: ") message.remove_prefix(9);
    return absl::InvalidArgumentError(absl::StrCat(ConstraintKindName(kind), ": ", message));
  }
  std::lock_guard<std::mutex> lock(mu_);
  compiled_.emplace_front(std::move(key), constraint);
  while (compiled_.size() > max_constraints_) compiled_.pop_back();
  return std::shared_ptr<const GrammarConstraint>(constraint);
}

}  // namespace crossreg::grammar
