// The tests of jinja2 3.1 (x is defined, x is string, n is divisibleby 3, x is eq 'a').
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

using TestFunction = absl::StatusOr<bool> (*)(const Value& input, const CallArgs& args);

// The test called `name`, or null when there is none (every jinja2 builtin test is here).
TestFunction FindTest(std::string_view name);

}  // namespace crossreg::jinja
