#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
  std::vector<float> p;
  ProcessedDistribution(logits.data(), 4, {0.0f, 0, 1.0f, 1}, p);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

TEST(SamplerTest, TemperatureTopKTopP) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  std::vector<float> p;
  ProcessedDistribution(logits.data(), 4, {1.0f, 0, 1.0f, 0}, p);
  EXPECT_NEAR(p[0], 0.1, 1e-6);
  EXPECT_NEAR(p[3], 0.4, 1e-6);
  ProcessedDistribution(logits.data(), 4, {1.0f, 2, 1.0f, 0}, p);  // top-2: 0.3, 0.4
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[2], 0.3 / 0.7, 1e-6);
  ProcessedDistribution(logits.data(), 4, {1.0f, 0, 0.65f, 0}, p);  // 0.4 + 0.3 >= 0.65
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[3], 0.4 / 0.7, 1e-6);
  ProcessedDistribution(logits.data(), 4, {1.0f, 0, 0.05f, 0}, p);  // always keeps one
  EXPECT_EQ(p[3], 1.0f);
  ProcessedDistribution(logits.data(), 4, {0.5f, 0, 1.0f, 0}, p);  // T=0.5 squares
  EXPECT_NEAR(p[3], 0.16 / 0.30, 1e-6);
}

// Top-p alone finds its nucleus without sorting the vocabulary: the probabilities equal the
// sorting definition's, bit for bit, over peaked, flat, tied and -inf logits, temperatures
// and min_p; a wrong octave margin or summation order would move some of them.
TEST(SamplerTest, NucleusWithoutSortingGivesTheSortingDefinitionsBits) {
  Rng rng(11);
  auto normal = [&] {
    const double u1 = std::max(rng.Uniform(), 1e-300), u2 = rng.Uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  };
  int cases = 0, nontrivial = 0;
  for (int vocab : {7, 300, 16384}) {
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<float> z(static_cast<size_t>(vocab));
      for (int i = 0; i < vocab; ++i) {
        const float scale = shape == 0 ? 1.0f : shape == 1 ? 6.0f : 0.05f;
        z[static_cast<size_t>(i)] = scale * normal();
      }
      if (shape == 3) {  // ties (every value four times) and excluded tokens
        for (int i = 0; i < vocab; ++i) z[static_cast<size_t>(i)] = std::floor(4.0f * normal()) / 4.0f;
        for (int i = 0; i < vocab; i += 5) z[static_cast<size_t>(i)] = -INFINITY;
      }
      for (float temperature : {0.3f, 0.7f, 1.0f, 1.7f}) {
        for (float top_p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f}) {
          for (float min_p : {0.0f, 0.01f}) {
            const SamplingParams params{temperature, 0, top_p, min_p, 5};
            std::vector<float> fast, sorted;
            ProcessedDistribution(z.data(), vocab, params, fast);
            ProcessedDistributionBySorting(z.data(), vocab, params, sorted);
            ASSERT_EQ(fast, sorted) << "vocab " << vocab << " shape " << shape << " T " << temperature << " top_p "
                                    << top_p << " min_p " << min_p;
            ++cases;
            nontrivial += std::count_if(fast.begin(), fast.end(), [](float x) { return x > 0.0f; }) > 1;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 4 * 4 * 5 * 2);
  EXPECT_GT(nontrivial, cases / 2);  // most nuclei hold several tokens
}

TEST(SamplerTest, ValidateNamesTheField) {
  auto message = [](float t, int k, float p) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    return std::string(s.Validate().message());
  };
  EXPECT_NE(message(-1.0f, 0, 1.0f).find("temperature"), std::string::npos);
  EXPECT_NE(message(1.0f, -2, 1.0f).find("top_k"), std::string::npos);
  EXPECT_NE(message(1.0f, 0, 1.5f).find("top_p"), std::string::npos);
  EXPECT_EQ(message(0.7f, 40, 0.9f), "");
}

}  // namespace
}  // namespace crossreg
