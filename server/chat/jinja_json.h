// JSON in and out of the interpreter: the render context (a JSON object) becomes values
// as Python's json.loads would make them, and the tojson filter writes values exactly as
// Hugging Face's tojson does, which is Python's json.dumps(x, ensure_ascii=False, ...).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// null -> None, numbers -> int or float, arrays -> list, objects -> dict in their order.
// INVALID_ARGUMENT for a string that is not UTF-8, an unsigned integer beyond int64, or
// nesting deeper than kMaxValueDepth.
absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json);

// json.dumps's options as tojson passes them.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // the indent string; none for one line
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value, ...). Fails as Python does for values JSON cannot hold ("Object of
// type Undefined is not JSON serializable").
absl::StatusOr<std::string> PythonJsonDumps(const Value& value, const JsonDumpOptions& options);

}  // namespace crossreg::jinja
