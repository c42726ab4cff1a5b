// Renders a parsed template against a context, with jinja2's scoping: a for loop's body
// and a macro's body get scopes of their own (so {% set %} inside them does not leak,
// which is why templates use namespace()), {% if %} does not, and a macro sees the
// variables of the place it was defined. Each render has its own state, so one parsed
// template renders on many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/chat/jinja_ast.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

struct RenderLimits {
  size_t max_output_bytes = 8 << 20;  // also the largest string a render may build
  int64_t max_steps = 50'000'000;     // expression evaluations, loop iterations, 64-byte chunks of text
  int max_depth = 200;                // nested evaluation, macro calls included, may go 2 x max_depth deep
};

// The text `body` renders to with the variables of `context` (a dict). INVALID_ARGUMENT
// "line L: <what>" for what jinja2 would raise at render time (raise_exception's message
// among them) and for a render past `limits`.
absl::StatusOr<std::string> RenderBody(const ast::Body& body, const Value& context, const RenderLimits& limits);

}  // namespace crossreg::jinja
