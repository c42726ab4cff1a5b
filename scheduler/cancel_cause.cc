#include "scheduler/cancel_cause.h"

#include <string>

#include "absl/strings/cord.h"

namespace crossreg {
namespace {

constexpr char kPayloadType[] = "type.crossreg/CancelCause";

}  // namespace

absl::Status CancelledBecause(CancelCause cause, std::string_view message) {
  absl::Status status = absl::CancelledError(std::string(message));
  status.SetPayload(kPayloadType, absl::Cord(std::string(1, static_cast<char>('0' + static_cast<int>(cause)))));
  return status;
}

std::optional<CancelCause> CancelCauseOf(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kCancelled) return std::nullopt;
  const auto payload = status.GetPayload(kPayloadType);  // absl::optional, std::optional or not
  if (!payload.has_value() || payload->size() != 1) return std::nullopt;
  const int value = static_cast<int>(std::string(*payload)[0] - '0');
  if (value < 0 || value > static_cast<int>(CancelCause::kShutdown)) return std::nullopt;
  return static_cast<CancelCause>(value);
}

}  // namespace crossreg
