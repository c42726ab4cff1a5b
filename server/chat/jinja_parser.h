// Tokens into a syntax tree, with jinja2 3.1's grammar and operator precedence (filters
// and tests bind tighter than any operator: a + b | trim is a + (b | trim)). Filters and
// tests are resolved here, so an unknown or unsupported one fails at parse time; tags
// jinja2 has and this interpreter does not (include, extends, call, ...) fail here too.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/chat/jinja_ast.h"
#include "server/chat/jinja_lexer.h"

namespace crossreg::jinja {

// INVALID_ARGUMENT "line L, column C: <what>". Statements and expressions nested deeper
// than `max_depth` are refused, so neither parsing nor rendering can exhaust the stack.
absl::StatusOr<ast::Body> ParseTokens(const std::vector<Token>& tokens, int max_depth);

}  // namespace crossreg::jinja
