#include "server/http/openai_response.h"

#include <chrono>
#include <optional>

#include "absl/strings/match.h"
#include "engine/field_violation.h"
#include "server/request_end.h"

namespace crossreg::server {
namespace {

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
    case 413:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 408:
    case 504:
      return "timeout_error";
    case 429:
      return "rate_limit_error";
    case 499:
      return "cancelled";
    default:
      return "server_error";
  }
}

}  // namespace

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return EndReasonOfError(status) == RequestEndReason::kShutdown ? 503 : 499;
    default:
      return 500;
  }
}

OpenAiJson ErrorJson(int http_status, const absl::Status& error) {
  const std::optional<std::string> field = ViolatedField(error);
  OpenAiJson param = nullptr;
  if (field.has_value()) param = *field;
  return OpenAiJson{{"error",
                     {{"message", std::string(error.message())},
                      {"type", ErrorType(http_status)},
                      {"param", param},
                      {"code", nullptr}}}};
}

OpenAiJson ErrorJson(int http_status, const std::string& message) {
  return OpenAiJson{
      {"error", {{"message", message}, {"type", ErrorType(http_status)}, {"param", nullptr}, {"code", nullptr}}}};
}

std::string JsonText(const OpenAiJson& json) { return json.dump(-1, ' ', false, OpenAiJson::error_handler_t::replace); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace crossreg::server
