// The OpenAI API's reply shapes and status codes, shared by the front door's
// immediate answers and a generation's final or streamed ones.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace crossreg::server {

using OpenAiJson = nlohmann::ordered_json;

// HTTP status for an error ending or refusing a request. CANCELLED is 499 (the
// request's owner cancelled it, as gRPC reports CANCELLED; no reply reaches a client
// that disconnected), except a cancel by the server's shutdown: 503.
int HttpStatusOf(const absl::Status& status);

// OpenAI's error object {"error": {"message", "type", "param", "code"}}; `param` is
// the field the error names (engine/field_violation.h), null when it names none.
OpenAiJson ErrorJson(int http_status, const absl::Status& error);
// An error that names no field (transport limits, authentication): `param` is null.
OpenAiJson ErrorJson(int http_status, const std::string& message);

// JSON text as replies carry it (invalid UTF-8 replaced, not thrown on).
std::string JsonText(const OpenAiJson& json);

int64_t UnixNow();

}  // namespace crossreg::server
