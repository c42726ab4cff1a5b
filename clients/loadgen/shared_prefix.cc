#include "clients/loadgen/shared_prefix.h"

#include "absl/strings/str_format.h"
#include "clients/loadgen/distinct_windows.h"

namespace crossreg::clients {

int SharedPrefixPoolTokens(const SharedPrefixShape& shape) {
  return shape.prefix_tokens + shape.suffix_tokens + shape.requests - 1;
}

absl::Status CheckSharedPrefixFits(const SharedPrefixShape& shape, int max_tokens, int context_length) {
  const int64_t need = int64_t{shape.prefix_tokens} + shape.suffix_tokens + max_tokens;
  if (need <= context_length) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--workload=shared_prefix: --prefix_tokens (%d) + --suffix_tokens (%d) + --max_tokens (%d) = %d exceeds the "
      "model's context of %d tokens",
      shape.prefix_tokens, shape.suffix_tokens, max_tokens, need, context_length));
}

absl::StatusOr<std::vector<std::vector<int32_t>>> SharedPrefixPrompts(const std::vector<int32_t>& pool,
                                                                      const SharedPrefixShape& shape, int* shuffled) {
  if (pool.size() < static_cast<size_t>(shape.prefix_tokens)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the setup call gave %zu token ids, fewer than --prefix_tokens=%d", pool.size(), shape.prefix_tokens));
  }
  auto suffixes = DistinctWindows(pool, shape.suffix_tokens, shape.requests, shape.prefix_tokens, shuffled);
  if (!suffixes.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat("--suffix_tokens=%d x --requests=%d: %s", shape.suffix_tokens,
                                                         shape.requests, suffixes.status().message()));
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& suffix : *suffixes) {
    std::vector<int32_t> prompt(pool.begin(), pool.begin() + shape.prefix_tokens);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

}  // namespace crossreg::clients
