#include "tests/testing/exact_probabilities.h"

#include <cmath>
#include <functional>

#include "gtest/gtest.h"

namespace crossreg::testing {

std::vector<double> ExactSequenceProbabilities(Backend& backend, PagedKvCache& kv, int vocab,
                                               const std::vector<int32_t>& prompt, int depth,
                                               const SamplingParams& sampling, const LogitAdjustments* adjust,
                                               grammar::GrammarState* grammar) {
  std::vector<double> out;
  TokenHistory history(prompt, {});
  std::vector<float> logits, probs;
  // Depth-first over the tree of continuations, reusing the KV of the prefix.
  const SequenceId seq = kv.CreateSequence();
  ForwardBatch b;
  for (size_t p = 0; p + 1 < prompt.size(); ++p)
    b.rows.push_back({.seq = seq, .position = static_cast<int32_t>(p), .token = prompt[p]});
  if (!b.rows.empty()) {
    EXPECT_TRUE(backend.Forward(b, kv, logits).ok());
  }
  std::function<void(int32_t, int, double)> visit = [&](int32_t last, int level, double mass) {
    const int64_t len = kv.length(seq);
    ForwardBatch row;
    row.rows.push_back({.seq = seq, .position = static_cast<int32_t>(len), .token = last, .want_logits = true});
    EXPECT_TRUE(backend.Forward(row, kv, logits).ok());
    if (adjust != nullptr) history.Apply(*adjust, logits.data(), vocab);
    if (grammar != nullptr) grammar->MaskLogits(logits.data(), vocab);
    ProcessedDistribution(logits.data(), vocab, sampling, probs);
    const std::vector<float> here = probs;
    for (int32_t t = 0; t < vocab; ++t) {
      if (level + 1 == depth) {
        out.push_back(mass * here[t]);
      } else if (here[t] > 0) {
        history.PushGenerated(t);
        if (grammar != nullptr) grammar->Push(t);
        visit(t, level + 1, mass * here[t]);
        if (grammar != nullptr) grammar->Pop();
        history.PopGenerated(t);
      } else {
        for (int64_t i = 0, n = static_cast<int64_t>(std::pow(vocab, depth - level - 1)); i < n; ++i) {
          out.push_back(0.0);
        }
      }
    }
    EXPECT_TRUE(KvTransaction(kv).Commit(seq, len).ok());
  };
  visit(prompt.back(), 0, 1.0);
  kv.Free(seq);
  return out;
}

}  // namespace crossreg::testing
