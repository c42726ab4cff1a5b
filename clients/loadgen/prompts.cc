#include "clients/loadgen/prompts.h"

#include <fstream>

#include "absl/strings/str_replace.h"

namespace crossreg::clients {

std::vector<std::string> BuiltinPrompts() {
  return {
      "Once upon a time",
      "Lily and Ben went to the park. Lily saw a big red ball. Ben saw a big red ball too.",
      "The little dog was sad because",
      "One day, a girl named Sue found a shiny box in her garden.",
      "Tom liked to play with his toy car. Every day he played with his toy car in the yard.",
      "There was a bird who could not fly.",
      "Mom said, \"Time for bed!\" But Tim did not want to sleep.",
      "The sun was hot and the sky was blue. The cat sat in the sun.",
  };
}

absl::StatusOr<std::vector<std::string>> LoadPromptsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("--prompts_file: cannot open '" + path + "'");
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    prompts.push_back(absl::StrReplaceAll(line, {{"\\n", "\n"}}));
  }
  if (prompts.empty()) return absl::InvalidArgumentError("--prompts_file: '" + path + "' has no prompts");
  return prompts;
}

}  // namespace crossreg::clients
