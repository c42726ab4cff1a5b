#include "engine/field_violation.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

constexpr char kFieldPayload[] = "type.crossreg.dev/field_violation.field";
constexpr char kProblemPayload[] = "type.crossreg.dev/field_violation.problem";

}  // namespace

absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view problem) {
  absl::Status status(code, absl::StrCat(field, ": ", problem));
  status.SetPayload(kFieldPayload, absl::Cord(field));
  status.SetPayload(kProblemPayload, absl::Cord(problem));
  return status;
}

std::optional<std::string> ViolatedField(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kFieldPayload);
  if (!field.has_value()) return std::nullopt;
  return std::string(*field);
}

absl::Status RenameField(const absl::Status& status, const std::vector<std::pair<std::string, std::string>>& renames) {
  const std::optional<std::string> field = ViolatedField(status);
  const absl::optional<absl::Cord> problem = status.GetPayload(kProblemPayload);
  if (!field.has_value() || !problem.has_value()) return status;
  for (const auto& [from, to] : renames) {
    if (field->compare(0, from.size(), from) != 0) continue;
    const absl::string_view rest = absl::string_view(*field).substr(from.size());
    if (!rest.empty() && rest.front() != '.' && rest.front() != '[') continue;
    return FieldError(status.code(), absl::StrCat(to, rest), std::string(*problem));
  }
  return status;
}

}  // namespace crossreg
