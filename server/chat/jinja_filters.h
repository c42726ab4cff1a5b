// The filters of jinja2 3.1 that chat templates use (x | trim, tools | tojson(indent=4),
// messages | selectattr('role', 'equalto', 'user') | list), with jinja2's semantics;
// tojson is Hugging Face's: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False). Filters that return generators in jinja2 (select,
// map, unique, items, batch) return one-shot iterators here too.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

using FilterFunction = absl::StatusOr<Value> (*)(const Value& input, const CallArgs& args, RenderBudget& budget);

// The filter called `name`, or null when this interpreter has none.
FilterFunction FindFilter(std::string_view name);
// A jinja2 builtin filter this interpreter does not implement (wordwrap, urlize, ...).
bool IsUnsupportedJinjaFilter(std::string_view name);

}  // namespace crossreg::jinja
