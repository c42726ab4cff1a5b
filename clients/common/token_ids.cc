#include "clients/common/token_ids.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace crossreg::clients {

absl::StatusOr<std::vector<int32_t>> ParseTokenIds(const std::string& flag, const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id) || id < 0) {
      return absl::InvalidArgumentError("--" + flag + ": '" + std::string(part) + "' is not a token id");
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace crossreg::clients
