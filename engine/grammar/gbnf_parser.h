// GBNF, the grammar syntax llama.cpp made the de-facto standard, into a Grammar:
//   name ::= alternative | alternative        (rule names: letters, digits, '-', '_')
//   "literal" with \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH escapes
//   [a-z0-9_]  [^"\\]  character classes (same escapes), .  any character
//   ( ... ) grouping;  x* x+ x?  x{m} x{m,} x{m,n}  repetition;  # comments
// Rules may span lines; a new rule starts at `name ::=`. The start rule is `root`.
// Errors name the line and column and what was expected.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"

namespace crossreg::grammar {

// Errors: INVALID_ARGUMENT "grammar: line L, column C: ..." for what is not GBNF,
// RESOURCE_EXHAUSTED (same form) for a grammar over a size limit (repetition counts,
// rules, nesting, expanded elements: grammar_budget.h).
absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root = "root");

}  // namespace crossreg::grammar
