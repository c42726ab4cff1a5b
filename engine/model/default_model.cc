#include "engine/model/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_join.h"

namespace crossreg {

absl::StatusOr<std::string> FindDefaultModel() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CROSSREG_DEFAULT_MODEL")) candidates.emplace_back(env);
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    candidates.push_back((fs::path(exe).parent_path() / "../share/crossreg/models/default").lexically_normal());
  }
#ifdef CROSSREG_SOURCE_DIR
  candidates.push_back(std::string(CROSSREG_SOURCE_DIR) + "/models/default");
#endif
  std::error_code ec;
  for (const auto& c : candidates) {
    if (fs::exists(fs::path(c) / "config.json", ec)) return c;
  }
  return absl::NotFoundError("no embedded default model found (looked in " +
                             absl::StrJoin(candidates, ", ") +
                             "); pass --model PATH (a .gguf file or a Hugging Face directory)");
}

std::string BundledAdapter(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(model_dir) / "adapter";
  return fs::exists(dir / "adapter_config.json", ec) ? dir.string() : std::string();
}

std::string BundledNgramTable(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file = fs::path(model_dir) / "ngram_table.bin";
  return fs::is_regular_file(file, ec) ? file.string() : std::string();
}

}  // namespace crossreg
