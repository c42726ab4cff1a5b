// The prompts the load generator cycles through.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::clients {

// A handful of short story openings, suited to the small test models (stories260K):
// varied enough that n-gram drafting sees both repetitive and fresh text.
std::vector<std::string> BuiltinPrompts();

// One prompt per non-empty line of `path`; "\n" inside a line is a newline.
absl::StatusOr<std::vector<std::string>> LoadPromptsFile(const std::string& path);

}  // namespace crossreg::clients
