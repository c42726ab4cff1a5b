// Softmax and SwiGLU on the SIMD paths against the formulas in double with libm's exp:
// the vector exp's polynomial keeps each within a few float roundings, the masked tails
// leave the elements past n alone, and extreme inputs give 0 and finite values, not NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/ops.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

using OpPath = void (*)(float*, int64_t);
using GluPath = void (*)(float*, const float*, int64_t);

struct Paths {
  const char* name;
  OpPath softmax;
  GluPath swiglu;
};

std::vector<Paths> AvailablePaths() {
  std::vector<Paths> paths;
  if (DetectedSimdLevel() >= SimdLevel::kAvx2) paths.push_back({"avx2", internal::SoftmaxAvx2, internal::SwiGluAvx2});
  if (DetectedSimdLevel() >= SimdLevel::kAvx512) {
    paths.push_back({"avx512", internal::SoftmaxAvx512, internal::SwiGluAvx512});
  }
  return paths;
}

std::vector<double> ReferenceSoftmax(const std::vector<float>& x) {
  double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max<double>(max, v);
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp(static_cast<double>(x[i]) - max);
  for (double& v : p) v /= sum;
  return p;
}

TEST(VectorExpOpsTest, SoftmaxMatchesLibmWithinFloatRoundingAndLeavesThePastTheEndAlone) {
  const std::vector<Paths> paths = AvailablePaths();
  if (paths.empty()) GTEST_SKIP() << "no SIMD path on this CPU (or forced off)";
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (const Paths& path : paths) {
    for (int64_t n : {1, 3, 7, 8, 9, 16, 31, 100, 513}) {
      std::vector<float> x(static_cast<size_t>(n) + 5);
      for (float& v : x) v = dist(rng);
      const std::vector<float> tail(x.begin() + n, x.end());
      const std::vector<float> scores(x.begin(), x.begin() + n);
      const float max = *std::max_element(scores.begin(), scores.end());
      const std::vector<double> want = ReferenceSoftmax(std::vector<float>(x.begin(), x.begin() + n));
      path.softmax(x.data(), n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        // The float difference x - max carries a rounding of |x - max| * 2^-24 into the
        // exponent (libm's float path has it too), beside the polynomial's 2e-7.
        const double rel = 4e-7 + 1.2e-7 * std::fabs(scores[static_cast<size_t>(i)] - max);
        EXPECT_NEAR(x[static_cast<size_t>(i)], want[static_cast<size_t>(i)], rel * want[static_cast<size_t>(i)] + 1e-30)
            << path.name << " n " << n << " i " << i;
        sum += x[static_cast<size_t>(i)];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << path.name << " n " << n;
      EXPECT_EQ(std::vector<float>(x.begin() + n, x.end()), tail) << path.name << " wrote past n = " << n;
    }
  }
}

TEST(VectorExpOpsTest, SoftmaxGivesZeroToScoresFarBelowTheMaximum) {
  const std::vector<Paths> paths = AvailablePaths();
  if (paths.empty()) GTEST_SKIP() << "no SIMD path on this CPU (or forced off)";
  for (const Paths& path : paths) {
    std::vector<float> x = {0.0f, -200.0f, -1e30f, -std::numeric_limits<float>::infinity(), 5.0f};
    path.softmax(x.data(), static_cast<int64_t>(x.size()));
    EXPECT_NEAR(x[4], 1.0f / (1.0f + std::exp(-5.0f)), 1e-6) << path.name;
    EXPECT_LT(x[1], 1e-30f) << path.name;
    EXPECT_LT(x[2], 1e-30f) << path.name;
    EXPECT_LT(x[3], 1e-30f) << path.name;
    for (float v : x) EXPECT_FALSE(std::isnan(v)) << path.name;
  }
}

TEST(VectorExpOpsTest, SwiGluMatchesLibmWithinFloatRoundingAndStaysFiniteAtExtremes) {
  const std::vector<Paths> paths = AvailablePaths();
  if (paths.empty()) GTEST_SKIP() << "no SIMD path on this CPU (or forced off)";
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (const Paths& path : paths) {
    for (int64_t n : {1, 5, 8, 13, 64, 2051}) {
      std::vector<float> gate(static_cast<size_t>(n) + 3), up(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        gate[i] = dist(rng);
        up[i] = dist(rng);
      }
      if (n > 4) gate[0] = -150.0f, gate[1] = 150.0f, gate[2] = -90.0f, gate[3] = 0.0f;
      const std::vector<float> in = gate;
      path.swiglu(gate.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double g = in[static_cast<size_t>(i)];
        const double want = g / (1.0 + std::exp(-g)) * up[static_cast<size_t>(i)];
        EXPECT_NEAR(gate[static_cast<size_t>(i)], want, 5e-7 * std::fabs(want) + 1e-30)
            << path.name << " n " << n << " gate " << g;
      }
      for (size_t i = static_cast<size_t>(n); i < gate.size(); ++i) EXPECT_EQ(gate[i], in[i]) << path.name;
    }
  }
}

}  // namespace
}  // namespace crossreg::cpu
