// The methods of Python's str, list, tuple and dict that templates call
// (message.content.strip(), d.items(), s.split('</think>')), bound to their object.
//
// A method this interpreter does not implement (str.casefold) is still found, as a value
// that fails when called or printed, so a template never silently sees "undefined" where
// Python has a method. Methods that change a list or dict (append, update) are what the
// immutable sandbox forbids: they are undefined values that fail when called, as there.
#pragma once

#include <optional>
#include <string_view>

#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// The attribute `name` of `self` when it is a method of self's Python type, bound to it;
// nullopt when the type has no attribute of that name. `budget` (the render's) outlives
// the bound method.
std::optional<Value> FindMethod(const Value& self, std::string_view name, RenderBudget* budget);

// A value standing for something Python has and this interpreter does not support: it
// fails with "<what> is not supported" when called or printed.
Value UnsupportedFeature(std::string what);

}  // namespace crossreg::jinja
