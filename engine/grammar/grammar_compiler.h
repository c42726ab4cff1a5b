// Turns a request's structured-output ask (GBNF text, a JSON Schema, any JSON object,
// a regular expression) into a GrammarConstraint over the served vocabulary. Compiled
// constraints are kept by (kind, source), so requests that repeat a schema share its
// grammar and, above all, its cache of token masks.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/token_mask.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg::grammar {

enum class ConstraintKind { kGbnf, kJsonSchema, kJsonObject, kRegex };
const char* ConstraintKindName(ConstraintKind kind);  // "grammar", "json_schema", "json_object", "regex"

// Every token's bytes as generated text holds them, and the ids that end generation.
std::shared_ptr<const GrammarVocabulary> VocabularyOf(const Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids);

class GrammarCompiler {
 public:
  // `masks_bytes`: the mask cache of each compiled constraint.
  GrammarCompiler(std::shared_ptr<const GrammarVocabulary> vocab, size_t max_constraints = 32,
                  size_t masks_bytes = size_t{16} << 20);
  // INVALID_ARGUMENT whose message starts with the kind ("json_schema.properties.a: ...",
  // "grammar: line 2, column 5: ...", "regex: ...").
  absl::StatusOr<std::shared_ptr<const GrammarConstraint>> Compile(ConstraintKind kind, std::string_view source);
  const std::shared_ptr<const GrammarVocabulary>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const GrammarVocabulary> vocab_;
  const size_t max_constraints_;
  const size_t masks_bytes_;
  std::mutex mu_;
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<const GrammarConstraint>>> compiled_;
};

}  // namespace crossreg::grammar
