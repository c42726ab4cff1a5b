// DrawMostLikelyFirst (engine/sampler.h): the inverse CDF of P taken most likely
// first, found through octaves of probability rather than a sort of the vocabulary.
// It must give the token of the sorting definition for every u (the draw of AR and of
// seed-exact verification is this one function, so any difference would be a
// different text), follow P's frequencies, and never return a token P excludes.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"

namespace crossreg {
namespace {

// The definition: every token with mass, sorted by probability (ties: lower id), and
// the first whose running sum passes u; the least likely when rounding leaves u past
// the total.
int32_t DrawBySorting(const std::vector<float>& probs, double u) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(probs.size()); ++i) {
    if (probs[static_cast<size_t>(i)] > 0.0f) ids.push_back(i);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)] ||
           (probs[static_cast<size_t>(a)] == probs[static_cast<size_t>(b)] && a < b);
  });
  double cum = 0.0;
  for (int32_t id : ids) {
    cum += probs[static_cast<size_t>(id)];
    if (u < cum) return id;
  }
  return ids.back();
}

std::vector<float> RandomDistribution(Rng& rng, int vocab, int shape) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& z : logits) {
    const double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    z = static_cast<float>(normal * (shape == 0 ? 1.0 : shape == 1 ? 8.0 : 0.02));
    if (shape == 3) z = std::floor(z * 2.0f) / 2.0f;  // ties
  }
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = shape == 3 ? 0.9f : 1.0f;
  std::vector<float> probs;
  ProcessedDistribution(logits.data(), vocab, params, probs);
  return probs;
}

// The octaves change how the search is done, not what it finds: peaked, flat, tied and
// cut distributions, u over the whole range and at its edges.
TEST(MostLikelyFirstDrawTest, GivesTheSortingDefinitionsTokenForEveryU) {
  Rng rng(5);
  int draws = 0;
  for (int vocab : {2, 9, 300, 16384}) {
    for (int shape = 0; shape < 4; ++shape) {
      const std::vector<float> probs = RandomDistribution(rng, vocab, shape);
      std::vector<double> us = {0.0, 1e-12, 0.5, 1.0 - 0x1.0p-53};
      for (int i = 0; i < 200; ++i) us.push_back(rng.Uniform());
      for (double u : us) {
        ASSERT_EQ(DrawMostLikelyFirst(probs.data(), vocab, u), DrawBySorting(probs, u))
            << "vocab " << vocab << " shape " << shape << " u " << u;
        ++draws;
      }
    }
  }
  EXPECT_EQ(draws, 4 * 4 * 204);
}

TEST(MostLikelyFirstDrawTest, TakesTheMostLikelyTokenFirstAndSkipsExcludedOnes) {
  const std::vector<float> probs = {0.1f, 0.0f, 0.6f, 0.3f};
  EXPECT_EQ(DrawMostLikelyFirst(probs.data(), 4, 0.0), 2);
  EXPECT_EQ(DrawMostLikelyFirst(probs.data(), 4, 0.59), 2);
  EXPECT_EQ(DrawMostLikelyFirst(probs.data(), 4, 0.61), 3);
  EXPECT_EQ(DrawMostLikelyFirst(probs.data(), 4, 0.95), 0);
  EXPECT_EQ(DrawMostLikelyFirst(probs.data(), 4, 1.0 - 1e-16), 0);  // never the excluded token 1
  const std::vector<float> tied = {0.25f, 0.25f, 0.25f, 0.25f};
  EXPECT_EQ(DrawMostLikelyFirst(tied.data(), 4, 0.3), 1);  // ties: lower id first
  const std::vector<float> nothing = {0.0f, 0.0f};
  EXPECT_EQ(DrawMostLikelyFirst(nothing.data(), 2, 0.5), 0);
}

TEST(MostLikelyFirstDrawTest, FrequenciesFollowP) {
  const std::vector<double> p = {0.05, 0.0, 0.4, 0.25, 0.2, 0.1};
  std::vector<float> probs(p.begin(), p.end());
  std::vector<int64_t> counts(p.size(), 0);
  Rng rng(77);
  for (int i = 0; i < 100000; ++i) ++counts[static_cast<size_t>(DrawMostLikelyFirst(probs.data(), 6, rng.Uniform()))];
  EXPECT_EQ(counts[1], 0);
  const auto r = testing::ChiSquareTest(counts, p);
  EXPECT_GT(r.p_value, 1e-3) << "chi2 " << r.statistic;
  EXPECT_LT(r.total_variation, 0.01);
}

}  // namespace
}  // namespace crossreg
