// DrawToken (engine/sampler.h), the one draw rule of AR and of seed-exact verification:
// a two-round exponential race. Its draws follow P over one group and many, never
// name an excluded token, depend on the values and the numbers alone, and couple: two
// distributions raced with the same numbers agree with probability at least
// (1 - TV) / (1 + TV), where an inverse CDF would lose whenever two tokens swap ranks.
#include <cmath>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"

namespace crossreg {
namespace {

std::vector<float> Floats(const std::vector<double>& p) { return std::vector<float>(p.begin(), p.end()); }

// Draws at output positions 0 .. n-1 of one seed, counted per token.
std::vector<int64_t> Counts(const std::vector<float>& probs, int n, uint64_t seed) {
  const PositionRandom random(seed);
  std::vector<int64_t> counts(probs.size(), 0);
  for (int i = 0; i < n; ++i) {
    ++counts[static_cast<size_t>(DrawToken(probs.data(), static_cast<int>(probs.size()), random, i, RandomLane::kToken))];
  }
  return counts;
}

// Softmax of random normal logits times `scale` over `vocab` tokens, every fifth excluded.
std::vector<double> Distribution(int vocab, double scale, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> p(static_cast<size_t>(vocab));
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
    const double z = scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    p[static_cast<size_t>(i)] = i % 5 == 4 ? 0.0 : std::exp(z);
    sum += p[static_cast<size_t>(i)];
  }
  for (double& x : p) x /= sum;
  return p;
}

TEST(TokenDrawTest, FrequenciesFollowPWithinOneGroupAndAcrossMany) {
  // Six tokens (one group), then 300 peaked and 1,000 flat ones (5 and 16 groups).
  for (const std::vector<double>& p : {std::vector<double>{0.05, 0.0, 0.4, 0.25, 0.2, 0.1}, Distribution(300, 2.0, 3),
                                       Distribution(1000, 0.3, 4)}) {
    SCOPED_TRACE(p.size());
    const std::vector<int64_t> counts = Counts(Floats(p), 100000, 77);
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] == 0.0) EXPECT_EQ(counts[i], 0) << "an excluded token was drawn: " << i;
    }
    const auto r = testing::ChiSquareTest(counts, p);
    EXPECT_GT(r.p_value, 1e-3) << "chi2 " << r.statistic << " df " << r.degrees_of_freedom;
  }
}

TEST(TokenDrawTest, ADrawDependsOnTheValuesAndTheNumbersOnly) {
  const std::vector<float> p = Floats(Distribution(500, 1.0, 9));
  const std::vector<float> copy = p;
  const PositionRandom a(5), b(5);
  int lanes_differ = 0;
  for (int64_t position = 0; position < 200; ++position) {
    const int32_t x = DrawToken(p.data(), 500, a, position, RandomLane::kToken);
    ASSERT_EQ(x, DrawToken(copy.data(), 500, b, position, RandomLane::kToken));
    lanes_differ += x != DrawToken(p.data(), 500, a, position, RandomLane::kResidual);
  }
  EXPECT_GT(lanes_differ, 100);  // another lane, other numbers
  const std::vector<float> nothing(70, 0.0f);
  EXPECT_EQ(DrawToken(nothing.data(), 70, a, 0, RandomLane::kToken), 0);
}

// Agreement of P's and Q's draws with shared numbers, over `n` positions.
double Agreement(const std::vector<float>& p, const std::vector<float>& q, int n) {
  const PositionRandom random(11);
  int same = 0;
  for (int i = 0; i < n; ++i) {
    same += DrawToken(p.data(), static_cast<int>(p.size()), random, i, RandomLane::kToken) ==
            DrawToken(q.data(), static_cast<int>(q.size()), random, i, RandomLane::kToken);
  }
  return static_cast<double>(same) / n;
}

double TotalVariation(const std::vector<float>& p, const std::vector<float>& q) {
  double tv = 0.0;
  for (size_t i = 0; i < p.size(); ++i) tv += std::abs(static_cast<double>(p[i]) - q[i]);
  return tv / 2;
}

TEST(TokenDrawTest, SharedNumbersCoupleTwoDistributions) {
  constexpr int kDraws = 20000;
  const std::vector<float> p = Floats(Distribution(300, 1.5, 21));
  EXPECT_EQ(Agreement(p, p, kDraws), 1.0);
  // The two most likely tokens swap ranks: (0.5, 0.3, 0.2) against (0.3, 0.5, 0.2). An
  // inverse CDF most likely first agrees only on the third (0.2); the race at least
  // (1 - 0.2) / (1 + 0.2) = 0.67 of the time.
  const std::vector<float> swapped_p = {0.5f, 0.3f, 0.2f}, swapped_q = {0.3f, 0.5f, 0.2f};
  EXPECT_GT(Agreement(swapped_p, swapped_q, kDraws), 0.66);
  // A drafter's Q: P perturbed across its 300 tokens (5 groups).
  std::vector<float> q = p;
  Rng rng(2);
  double sum = 0.0;
  for (float& x : q) sum += (x *= static_cast<float>(std::exp(0.8 * (rng.Uniform() - 0.5))));
  for (float& x : q) x = static_cast<float>(x / sum);
  const double tv = TotalVariation(p, q);
  const double bound = (1 - tv) / (1 + tv);
  EXPECT_GT(Agreement(p, q, kDraws), bound - 0.015) << "TV " << tv;  // 4 sigma of 20,000 draws
}

}  // namespace
}  // namespace crossreg
