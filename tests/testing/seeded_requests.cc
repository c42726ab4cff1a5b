#include "tests/testing/seeded_requests.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/grammar/grammar_compiler.h"
#include "gtest/gtest.h"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

SeedIdentityModel LoadSeedIdentityModel() {
  SeedIdentityModel m;
  auto model = LoadModel(Stories260KGguf());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return m;
  m.model = std::move(*model);
  RandomLoraOptions lo;
  lo.magnitude = 0.3f;
  lo.seed = 3;
  m.drafter = MakeRandomLoraAdapter(m.model->config, lo);
  const std::vector<int32_t> eos(m.model->config.eos_token_ids.begin(), m.model->config.eos_token_ids.end());
  auto grammar = grammar::MakeGrammarConstraint(R"(root ::= [A-Za-z,]+ (" " [A-Za-z,]+)* "."?)", "grammar",
                                                grammar::VocabularyOf(*m.model->tokenizer, eos));
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  if (grammar.ok()) m.grammar = *grammar;
  for (const StoriesReference& ref : LoadStoriesReference()) m.prompts.emplace_back(ref.prompt_ids.begin(), ref.prompt_ids.end());
  return m;
}

GenerationRequest SeededSampledRequest(const SeedIdentityModel& m, int i) {
  GenerationRequest r;
  r.request_id = absl::StrCat("seeded-", i);
  const auto& base = m.prompts[static_cast<size_t>(i) % m.prompts.size()];
  r.prompt_ids = base;
  // Later requests extend the prompt with tokens of the reference's own text, so that
  // prompts share prefixes (prefix-cache hits) without repeating exactly.
  const auto& other = m.prompts[static_cast<size_t>(i + 1) % m.prompts.size()];
  for (int k = 0; k < (i / static_cast<int>(m.prompts.size())) % 9; ++k) {
    r.prompt_ids.push_back(other[static_cast<size_t>(k) % other.size()]);
  }
  r.max_new_tokens = 24 + (i % 3) * 8;
  r.stop_at_eos = false;
  SamplingParams& s = r.sampling;
  static constexpr float kTemperatures[] = {0.7f, 0.85f, 1.0f, 1.2f};
  static constexpr float kTopP[] = {1.0f, 0.95f, 0.9f};
  s.temperature = kTemperatures[i % 4];
  s.top_p = kTopP[i % 3];
  if (i % 7 == 3) s.top_k = 40;
  if (i % 7 == 5) s.min_p = 0.02f;
  s.seed = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);  // all 64 bits in use
  LogitAdjustments& a = r.adjustments;
  switch (i % 5) {
    case 1: a.repetition_penalty = 1.1f; break;
    case 2: a.presence_penalty = 0.5f; break;
    case 3: a.frequency_penalty = 0.4f; break;
    case 4:
      a.repetition_penalty = 1.2f;
      a.frequency_penalty = 0.3f;
      a.logit_bias = {{13, 2.0f}, {100, -3.0f}};
      break;
    default: break;
  }
  if (i % 6 == 5) r.grammar = m.grammar;
  return r;
}

std::unique_ptr<NgramTable> TableOfTexts(const std::vector<std::vector<int32_t>>& texts, int vocab, int wrong_every) {
  const int bits = 32 - __builtin_clz(static_cast<unsigned>(vocab - 1));
  std::map<uint64_t, uint32_t> pairs, triples;
  int64_t seen = 0;
  for (const std::vector<int32_t>& text : texts) {
    for (size_t i = 2; i < text.size(); ++i) {
      const auto next = static_cast<uint32_t>(++seen % wrong_every == 0 ? (text[i] + 7) % vocab : text[i]);
      const uint64_t pair = (static_cast<uint64_t>(text[i - 2]) << bits) | static_cast<uint64_t>(text[i - 1]);
      pairs.emplace(pair, next);
      if (i >= 3) triples.emplace((static_cast<uint64_t>(text[i - 3]) << (2 * bits)) | pair, next);
    }
  }
  std::vector<NgramTable::Order> orders(3);
  for (const auto& [key, next] : pairs) orders[1].keys.push_back(key), orders[1].next.push_back(next);
  for (const auto& [key, next] : triples) orders[2].keys.push_back(key), orders[2].next.push_back(next);
  auto table = NgramTable::FromOrders(vocab, bits, std::move(orders));
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *std::move(table) : nullptr;
}

}  // namespace crossreg::testing
