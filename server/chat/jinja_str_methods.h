// The methods of Python's str that templates call ("  x ".strip(), s.split('</think>'),
// s.startswith(('a', 'b')), '{} and {}'.format(a, b)), with Python's semantics: positions
// and lengths in code points, whitespace as str.isspace() has it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

using StrMethod = absl::StatusOr<Value> (*)(const std::string& self, const CallArgs& args, RenderBudget& budget);

// The str method called `name`, or null when this interpreter has none.
StrMethod FindStrMethod(std::string_view name);
// One of Python 3.11's other str methods (casefold, zfill, ...): there, not supported here.
bool IsUnsupportedStrMethod(std::string_view name);

// Python's optional start/end arguments (bound[first], bound[first + 1]) of find(),
// count(), index(): positions, negative from the end, clamped to [0, length].
void ClampRange(const std::vector<Value>& bound, size_t first, size_t length, size_t* start, size_t* end);
// "name() takes no arguments" unless `args` is empty.
absl::Status CheckNoArguments(std::string_view name, const CallArgs& args);

}  // namespace crossreg::jinja
