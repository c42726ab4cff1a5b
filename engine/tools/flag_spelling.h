// Lets command-line programs accept --max-new-tokens as well as --max_new_tokens:
// Abseil flags are named with underscores, users type dashes.
#pragma once

#include <string>
#include <vector>

namespace crossreg::tools {

// Rewrites dashes in the name part of every "--flag[=value]" argument to
// underscores; values are left alone. The strings must outlive the returned argv.
inline std::vector<char*> UnderscoreFlagNames(int argc, char** argv, std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  std::vector<char*> out;
  for (auto& a : storage) {
    if (a.rfind("--", 0) == 0) {
      const size_t end = std::min(a.find('='), a.size());
      for (size_t i = 2; i < end; ++i) {
        if (a[i] == '-') a[i] = '_';
      }
    }
    out.push_back(a.data());
  }
  return out;
}

}  // namespace crossreg::tools
