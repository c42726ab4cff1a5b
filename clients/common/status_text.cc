#include "clients/common/status_text.h"

namespace crossreg::clients {

std::string StatusCodeName(grpc::StatusCode code) {
  // Indexed by the code's value; the values are fixed by the gRPC spec (0..16).
  static const char* const kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int value = static_cast<int>(code);
  if (value >= 0 && value < static_cast<int>(std::size(kNames))) return kNames[value];
  return "CODE_" + std::to_string(value);
}

std::string FormatStatus(const grpc::Status& status) {
  std::string out = StatusCodeName(status.error_code());
  if (!status.error_message().empty()) out += ": " + status.error_message();
  return out;
}

}  // namespace crossreg::clients
