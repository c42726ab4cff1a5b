// Command-line helpers shared by every crossreg program (engine tools, server,
// clients): Abseil flags are named with underscores, users type dashes; --help should
// list the program's own flags, not those of linked libraries.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

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

// --help and --helpshort list the flags defined in source files whose path contains
// `source_fragment` (e.g. "crossreg_generate", "server/"), under `usage`.
inline void ConfigureFlagHelp(const char* source_fragment, const char* usage) {
  static std::string fragment;
  fragment = source_fragment;
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) { return absl::StrContains(path, fragment); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
}

// ConfigureFlagHelp, then parses argv with dashes accepted. Returns the positional
// arguments (argv[0] first).
inline std::vector<std::string> ParseFlags(int argc, char** argv, const char* source_fragment, const char* usage) {
  ConfigureFlagHelp(source_fragment, usage);
  std::vector<std::string> storage;
  std::vector<char*> args = UnderscoreFlagNames(argc, argv, storage);
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return std::vector<std::string>(rest.begin(), rest.end());
}

}  // namespace crossreg::tools
