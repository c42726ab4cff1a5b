// JSON from a client, parsed under limits the client cannot raise. A request body, a
// JSON schema or a tool definition is attacker-controlled text: nlohmann's DOM parser
// takes any nesting (and its serializer then recurses once per level), and its ordered
// objects find a member by a linear search, so a wide object costs time quadratic in
// its size. This parser builds the same ordered_json in one pass, linear in the text,
// and refuses what exceeds a limit at the moment the parser reaches it, naming the
// value's path. Duplicate member names are refused: RFC 8259 leaves their meaning to
// the reader, and a request must mean one thing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace crossreg {

struct JsonLimits {
  int max_depth = 64;                    // objects and arrays open at once
  size_t max_object_members = 4096;      // members of one object
  size_t max_array_elements = 1 << 20;   // elements of one array (a prompt of token ids)
  size_t max_values = 1 << 21;           // values in the whole document (bounds its memory)
};

// The text parsed, or INVALID_ARGUMENT as FieldViolation(path, what) (engine/field_violation.h):
// `path` is where the parser was, spelled as requests name fields ("messages[0].content",
// "logit_bias.\"05\"" for keys that are not identifiers); top-level members appear bare
// when `root` is empty and the document itself is then "body", else every path starts
// with `root` ("json_schema.properties.a"). Errors: not JSON (with nlohmann's message), a
// number beyond double's range, nesting beyond max_depth, more members, elements or
// values than allowed, a duplicate member name.
absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(std::string_view text, const JsonLimits& limits = {},
                                                        std::string_view root = "");

// A member name as a path shows it: as written when it looks like a field name
// (letters, digits, '_', '-', at most 64 bytes), else as a JSON string cut at 64 bytes,
// since names are arbitrary client bytes that end up in logs and replies.
std::string JsonPathKey(std::string_view key);

}  // namespace crossreg
