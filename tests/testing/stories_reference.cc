#include "tests/testing/stories_reference.h"

#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

std::vector<StoriesReference> LoadStoriesReference() {
  std::ifstream in(Stories260KReference());
  EXPECT_TRUE(in.good()) << "missing " << Stories260KReference();
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded());
  std::vector<StoriesReference> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    StoriesReference r;
    r.prompt = e.at("prompt").get<std::string>();
    r.prompt_ids = e.at("prompt_ids").get<std::vector<int>>();
    r.greedy_ids = e.at("greedy_ids").get<std::vector<int>>();
    r.logits_after_prompt = e.at("logits_after_prompt").get<std::vector<float>>();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace crossreg::testing
