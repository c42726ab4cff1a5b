// Parsing "1,2,3" token-id lists from the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::clients {

// Comma-separated non-negative integers; whitespace around items is allowed.
// The error names `flag` and the offending item.
absl::StatusOr<std::vector<int32_t>> ParseTokenIds(const std::string& flag, const std::string& text);

}  // namespace crossreg::clients
