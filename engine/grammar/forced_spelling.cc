#include "engine/grammar/forced_spelling.h"

namespace crossreg::grammar {

int32_t ForcedSpelling::FirstToken(std::string_view forced) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = first_.find(std::string(forced));
  return it == first_.end() ? -1 : it->second;
}

void ForcedSpelling::Record(std::string_view forced, int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = first_.find(std::string(forced));
  if (it != first_.end()) {
    it->second = token;
  } else if (first_.size() < capacity_) {
    first_.emplace(std::string(forced), token);
  }
}

}  // namespace crossreg::grammar
