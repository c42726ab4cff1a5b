// Attribute, item and slice access as jinja2's sandbox does it: x.name tries the Python
// attribute (a str or dict method) before the item, x[key] the item before the attribute,
// and what is missing, out of range or of the wrong type is undefined rather than an
// error. Only using an undefined value's attributes or items fails.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// x.name
absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name, RenderBudget* budget);
// x[key]
absl::StatusOr<Value> GetItem(const Value& object, const Value& key, RenderBudget* budget);
// x[start:stop:step], absent bounds passed as None; INVALID_ARGUMENT for a zero step.
absl::StatusOr<Value> GetSlice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace crossreg::jinja
