// The golden greedy outputs of stories260K (from llama2.c's run.c).
#pragma once

#include <string>
#include <vector>

namespace crossreg::testing {

struct StoriesReference {
  std::string prompt;
  std::vector<int> prompt_ids;
  std::vector<int> greedy_ids;
  std::vector<float> logits_after_prompt;
};

// Reads ../shared/models/stories260K/reference_greedy.json; fails the test if absent.
std::vector<StoriesReference> LoadStoriesReference();

}  // namespace crossreg::testing
