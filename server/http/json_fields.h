// Reading a client's JSON fields with errors that name them: a value's type as an
// error says it, the typed reads, and the refusal of unknown fields with the name a
// typo most likely meant. Shared by the OpenAI request's parts (openai_request.cc,
// openai_chat_request.cc).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace crossreg::server {

// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* TypeName(const nlohmann::ordered_json& value);

// FieldViolation(field, "must be a string, got ...") unless `value` is a string.
absl::StatusOr<std::string> StringField(const nlohmann::ordered_json& value, const std::string& field);
absl::StatusOr<bool> BoolField(const nlohmann::ordered_json& value, const std::string& field);

// Refuses the keys of `object` that are not in `known`, naming each (up to a few, in
// key order) with its path (`path` ends in '.' or is empty) and the known name it most
// likely meant: OpenAI answers unknown parameters with a 400 too, and a misspelt
// option silently left at its default is the worse failure.
absl::Status CheckKnownFields(const nlohmann::ordered_json& object, const std::string& path,
                              absl::Span<const absl::string_view> known);

}  // namespace crossreg::server
