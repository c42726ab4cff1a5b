// A request error names its field as data, not only in its text. The status (any code;
// InvalidArgument for a value out of its range) reads "field: problem", and its payload
// holds the field and the problem apart, so a front door renames a field into its
// protocol's spelling (the proto's `sampling.max_tokens`, the JSON API's `max_tokens`)
// or reports it (an OpenAI error's `param`) without parsing the message back.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace crossreg {

absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view problem);
inline absl::Status FieldViolation(absl::string_view field, absl::string_view problem) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, problem);
}

// The field a status names (a path such as "decoding.beta" or "sampling.stop[2]"); none
// for a status that is not a field error.
std::optional<std::string> ViolatedField(const absl::Status& status);

// The same error with its field spelled as another protocol spells it: the first of
// `renames` (from, to) whose `from` is the field or a prefix of it up to a '.' or '['
// ("sampling.stop" renames "sampling.stop[2]" to "stop[2]"). Other statuses, and fields
// no rename covers, come back as they were.
absl::Status RenameField(const absl::Status& status, const std::vector<std::pair<std::string, std::string>>& renames);

}  // namespace crossreg
