// Writing a whole file at once, with the failure as a Status naming the path.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace crossreg {

// Creates or truncates `path` and writes `bytes`; INTERNAL "cannot write PATH" on failure.
absl::Status WriteFileBytes(const std::string& path, const std::string& bytes);

}  // namespace crossreg
