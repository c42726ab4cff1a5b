// The request's fields, once: each field's path (as the engine's errors and the
// crossreg.v1 proto name it), its names in the OpenAI-style JSON bodies, and the range
// of a numeric field. The engine's validators check ranges here, the HTTP parser checks
// the value as the client wrote it against the same range, and the HTTP door renames
// an error's field from this table: a rule is written in one place and both front doors
// refuse a bad value with the same field and the same words.
#pragma once

#include <limits>
#include <optional>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace crossreg {

struct FieldRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  // lo itself excluded
  bool hi_open = false;
  absl::string_view note;  // appended to the rule: "(0: greedy)"
};

struct RequestField {
  absl::string_view path;         // "sampling.top_p": the engine's and the proto's name
  absl::string_view completions;  // its name in a /v1/completions body
  absl::string_view chat;         // ... in a /v1/chat/completions body
  std::optional<FieldRange> range;
};

absl::Span<const RequestField> RequestFields();
// The field whose path is `path`; null if none.
const RequestField* FindRequestField(absl::string_view path);

// OK when `value` is finite and within the range of the field at `path` (a field of
// the table with a range); otherwise INVALID_ARGUMENT naming the field: "must be in
// (0, 1], got 1.5". `as_sent` is the value as the client wrote it, for the message
// (a JSON number that rounds to the range's edge as a float); empty: `value` printed.
// `element` names a part of the field in the error ("[4]": sampling.logit_bias[4]).
absl::Status CheckFieldRange(absl::string_view path, double value, absl::string_view as_sent = {},
                             absl::string_view element = {});

// The renames (path, JSON name) for an endpoint's body, for RenameField.
std::vector<std::pair<std::string, std::string>> JsonFieldNames(bool chat);

}  // namespace crossreg
