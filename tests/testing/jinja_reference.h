// What the Jinja parity tests (tests/unit/jinja_*_test.cc) share: the context every
// reference case renders with, and helpers that parse and render with it. Each expected
// text in those tests is what Python's jinja2 3.1 renders for the template with
// kContext, configured as Hugging Face configures it (tests/chat/test_jinja_parity.py).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"

namespace crossreg::jinja {

inline constexpr char kContext[] = R"J({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi é"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, "x"]}}}]}], "d": {"b": 2, "a": 1}, "xs": [3, 1, 2], "s": "Hello World", "u": "héllo wörld ΣΑΣ", "n": null, "t": true, "i": 7, "f": 1.5})J";

// A template and what jinja2 renders for it.
struct Case {
  const char* source;
  const char* expected;
};

inline absl::StatusOr<std::string> Render(const std::string& source, const char* context = kContext) {
  auto parsed = Template::Parse(source);
  if (!parsed.ok()) return parsed.status();
  return parsed->Render(nlohmann::ordered_json::parse(context));
}

// The error `source` gives, parsing or rendering with kContext.
inline std::string ErrorOf(const std::string& source) {
  auto rendered = Render(source);
  if (rendered.ok()) return "rendered: " + *rendered;
  EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument) << source;
  return std::string(rendered.status().message());
}

}  // namespace crossreg::jinja
