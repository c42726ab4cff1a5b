// The shared_prefix workload: every prompt is one common prefix of token ids followed
// by a suffix of its own, so a prefix cache can serve all but the first request's
// prefix (and only the prefix: the suffixes differ from their first ids on).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crossreg::clients {

struct SharedPrefixShape {
  int prefix_tokens = 0;  // --prefix_tokens
  int suffix_tokens = 0;  // --suffix_tokens
  int requests = 0;       // --requests
};

// Token ids to ask of the setup call: the prefix, then the text after it, enough for
// each request's suffix to start at an offset of its own.
int SharedPrefixPoolTokens(const SharedPrefixShape& shape);

// A request's prompt plus its max_tokens must fit the model's context; the error
// names the flags.
absl::Status CheckSharedPrefixFits(const SharedPrefixShape& shape, int max_tokens, int context_length);

// prompt i = pool[0, prefix_tokens) + suffix i. The suffixes are DistinctWindows of the
// pool starting right after the prefix, so they read as the story's continuation
// (wrapping into the prefix's text only when the pool runs out). `shuffled`, when
// given, counts the suffixes that had to be shuffled ids (see DistinctWindows).
absl::StatusOr<std::vector<std::vector<int32_t>>> SharedPrefixPrompts(const std::vector<int32_t>& pool,
                                                                      const SharedPrefixShape& shape,
                                                                      int* shuffled = nullptr);

}  // namespace crossreg::clients
