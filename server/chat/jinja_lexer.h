// Template source into tokens, as jinja2 3.1's lexer cuts it with Hugging Face's
// settings: {{ }}, {% %} and {# #} with the -/+ whitespace controls, trim_blocks (the
// newline after a block or comment tag is dropped) and lstrip_blocks (spaces and tabs
// before a block or comment tag on its line are dropped), {% raw %}, newlines normalised
// to "\n" and one trailing newline removed. String literals are decoded with Python's
// escapes. One pass over the source.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::jinja {

enum class TokenKind {
  kData,           // template text (raw blocks included)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,  // + - * / // % ** ~ == != < <= > >= = . : | , ; ( ) [ ] { }
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // the data, name, decoded string or operator
  int64_t integer = 0;
  double number = 0;
  int line = 1;
  int column = 1;  // in code points, from 1
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// The tokens of `source`, ending with kEnd. INVALID_ARGUMENT "line L, column C: <what>"
// for text jinja2 rejects (an unclosed comment or string, an unknown character, an
// unbalanced bracket) and for source that is not UTF-8.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options);

}  // namespace crossreg::jinja
