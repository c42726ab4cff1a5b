#include "engine/decoding/ngram_drafter.h"

#include <algorithm>

namespace crossreg {

std::vector<int32_t> NgramDrafts(const std::vector<int32_t>& context, int ngram_max, int max_tokens) {
  const int64_t len = static_cast<int64_t>(context.size());
  for (int n = std::min<int64_t>(ngram_max, len - 1); n >= 1; --n) {
    const auto suffix = context.end() - n;
    // Latest match that ends before the suffix itself starts.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, context.end(), context.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min<int64_t>(len, from + max_tokens);
      return std::vector<int32_t>(context.begin() + from, context.begin() + to);
    }
  }
  return {};
}

}  // namespace crossreg
