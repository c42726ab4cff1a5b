#include "engine/sampler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
  Sampler s({0.0f, 0, 1.0f, 1});
  EXPECT_EQ(s.Sample(logits.data(), 4), 1);
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

TEST(SamplerTest, SameSeedSameDrawsAndFrequenciesMatch) {
  const std::vector<float> probs = {0.1f, 0.0f, 0.6f, 0.3f};
  Rng a(77), b(77);
  std::vector<int> counts(4, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const int x = SampleFromDistribution(probs.data(), 4, a);
    ASSERT_EQ(x, SampleFromDistribution(probs.data(), 4, b));
    ++counts[x];
  }
  EXPECT_EQ(counts[1], 0);
  double chi2 = 0;
  for (int i : {0, 2, 3}) {
    const double e = n * probs[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 13.8);  // p > 0.001 with 2 degrees of freedom
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
