#include "clients/common/program.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "clients/common/repeated_flag.h"
#include "clients/common/request_flags.h"
#include "common/flags/flag_spelling.h"

namespace crossreg::clients {

void ParseClientCommandLine(int argc, char** argv, const char* usage) {
  // Only our flags in --help (Abseil's own are noise).
  tools::ConfigureFlagHelp("clients/", usage);

  std::vector<std::string> storage;
  tools::UnderscoreFlagNames(argc, argv, storage);
  for (auto& a : storage) {
    // Same flag, the engine CLI's spelling.
    if (a == "--max_new_tokens" || a.rfind("--max_new_tokens=", 0) == 0) a.replace(0, 16, "--max_tokens");
  }
  SetRepeatedStopValues(TakeRepeatedFlag(storage, "stop"));

  std::vector<char*> args;
  for (auto& a : storage) args.push_back(a.data());
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (rest.size() > 1) {
    std::cerr << argv[0] << ": unexpected argument '" << rest[1]
              << "' (flags start with --; quote a prompt: --prompt \"...\")\n";
    std::exit(2);
  }
}

}  // namespace crossreg::clients
