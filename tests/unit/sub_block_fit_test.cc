// The quantizer's sub-block fits for a whole super-block (the lanes of
// engine/quant/sub_block_fit_avx2.cc where the CPU has AVX2) against the one-sub-block
// definitions, bit for bit: a K-quant file must not depend on the host that wrote it.
#include "engine/quant/sub_block_fit.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg::quant::internal {
namespace {

constexpr int kSuperBlock = 256;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

bool HasAvx2() { return __builtin_cpu_supports("avx2"); }

// Super-blocks of the shapes a fit meets: weights of every scale, sub-blocks flat, zero,
// one-signed or on a grid (ties in the rounding), f16-subnormal and saturating scales,
// and sub-blocks of very different scales side by side.
std::vector<std::vector<float>> Cases() {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::vector<float>> cases;
  for (int kind = 0; kind < 11; ++kind) {
    for (int rep = 0; rep < 40; ++rep) {
      std::vector<float> x(kSuperBlock);
      for (int e = 0; e < kSuperBlock; ++e) {
        float v = 0.0f;
        switch (kind) {
          case 0: v = 0.02f * normal(rng); break;
          case 1: v = uniform(rng); break;
          case 2: v = 0.02f * normal(rng) * (uniform(rng) > 0.97f ? 100.0f : 1.0f); break;
          case 3: v = std::fabs(normal(rng)); break;
          case 4: v = -std::fabs(normal(rng)) - 0.1f; break;
          case 5: v = (e / 16 + rep) % 3 == 0 ? 0.25f * static_cast<float>(rep % 5 - 2) : normal(rng); break;
          case 6: v = (e / 32 + rep) % 4 == 0 ? 0.0f : normal(rng); break;
          case 7: v = 1e-7f * normal(rng); break;
          case 8: v = 1e6f * normal(rng); break;
          case 9: v = std::round(uniform(rng) * 8.0f) * 0.5f; break;
          case 10: v = normal(rng) * std::pow(10.0f, static_cast<float>((e / 16 * 7 + rep) % 9) - 4.0f); break;
        }
        x[e] = v;
      }
      cases.push_back(std::move(x));
    }
  }
  return cases;
}

struct Shape {
  int sub, count;
};
constexpr Shape kShapes[] = {{32, 8}, {16, 16}};

TEST(SubBlockFitTest, ScaleMinsEqualOneSubBlockAtATime) {
  for (const auto& x : Cases()) {
    for (const Shape shape : kShapes) {
      for (int nmax : {3, 15, 31}) {
        std::vector<float> want_scale(shape.count), want_min(shape.count);
        for (int j = 0; j < shape.count; ++j) {
          FitScaleMin(x.data() + shape.sub * j, shape.sub, nmax, &want_scale[j], &want_min[j]);
        }
        std::vector<float> scale(shape.count), min(shape.count);
        FitScaleMins(x.data(), shape.sub, shape.count, nmax, scale.data(), min.data());
        for (int j = 0; j < shape.count; ++j) {
          ASSERT_EQ(Bits(scale[j]), Bits(want_scale[j])) << "sub " << shape.sub << " nmax " << nmax << " j " << j;
          ASSERT_EQ(Bits(min[j]), Bits(want_min[j])) << "sub " << shape.sub << " nmax " << nmax << " j " << j;
        }
        if (!HasAvx2()) continue;
        FitScaleMinsAvx2(x.data(), shape.sub, nmax, scale.data(), min.data());
        for (int j = 0; j < shape.count; ++j) {
          ASSERT_EQ(Bits(scale[j]), Bits(want_scale[j])) << "avx2 sub " << shape.sub << " nmax " << nmax << " j " << j;
          ASSERT_EQ(Bits(min[j]), Bits(want_min[j])) << "avx2 sub " << shape.sub << " nmax " << nmax << " j " << j;
        }
      }
    }
  }
}

TEST(SubBlockFitTest, SymmetricScalesEqualOneSubBlockAtATime) {
  for (const auto& x : Cases()) {
    for (const Shape shape : kShapes) {
      for (int half : {4, 32}) {
        std::vector<float> want(shape.count), got(shape.count);
        for (int j = 0; j < shape.count; ++j) want[j] = FitSymmetricScale(x.data() + shape.sub * j, shape.sub, half);
        FitSymmetricScales(x.data(), shape.sub, shape.count, half, got.data());
        for (int j = 0; j < shape.count; ++j) {
          ASSERT_EQ(Bits(got[j]), Bits(want[j])) << "sub " << shape.sub << " half " << half << " j " << j;
        }
        if (!HasAvx2()) continue;
        FitSymmetricScalesAvx2(x.data(), shape.sub, half, got.data());
        for (int j = 0; j < shape.count; ++j) {
          ASSERT_EQ(Bits(got[j]), Bits(want[j])) << "avx2 sub " << shape.sub << " half " << half << " j " << j;
        }
      }
    }
  }
}

TEST(SubBlockFitTest, ErrorsEqualOneSubBlockAtATime) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const auto& x : Cases()) {
    for (const Shape shape : kShapes) {
      for (int trials : {1, 3}) {
        const int n = trials * shape.count;
        std::vector<float> scale(n), min(n), got(n);
        for (int i = 0; i < n; ++i) {
          // Zero, negative and tiny scales too: the fits try a step either side of zero.
          scale[i] = i % 5 == 0 ? 0.0f : uniform(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 5.0f);
          min[i] = i % 3 == 0 ? 0.0f : uniform(rng);
        }
        // Trial t's set for sub-block j at [t * count + j].
        auto want = [&](int i, int qlo, int qhi) {
          return SubBlockError(x.data() + shape.sub * (i % shape.count), shape.sub, scale[i], min[i], qlo, qhi);
        };
        SubBlockErrors(x.data(), shape.sub, shape.count, trials, scale.data(), min.data(), 0, 15, got.data());
        for (int i = 0; i < n; ++i) ASSERT_EQ(Bits(got[i]), Bits(want(i, 0, 15))) << "sub " << shape.sub << " i " << i;
        if (!HasAvx2()) continue;
        SubBlockErrorsAvx2(x.data(), shape.sub, trials, scale.data(), min.data(), -32, 31, got.data());
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(Bits(got[i]), Bits(want(i, -32, 31))) << "avx2 sub " << shape.sub << " i " << i;
        }
      }
    }
  }
}

// Each lane is its own sub-block: changing one sub-block changes that lane's fit alone.
TEST(SubBlockFitTest, LanesAreIndependent) {
  auto x = Cases()[7];
  std::vector<float> scale(8), min(8), scale2(8), min2(8);
  FitScaleMins(x.data(), 32, 8, 15, scale.data(), min.data());
  for (int i = 0; i < 32; ++i) x[3 * 32 + i] *= 3.0f;
  FitScaleMins(x.data(), 32, 8, 15, scale2.data(), min2.data());
  for (int j = 0; j < 8; ++j) {
    if (j == 3) {
      EXPECT_NE(Bits(scale[j]), Bits(scale2[j]));
    } else {
      EXPECT_EQ(Bits(scale[j]), Bits(scale2[j])) << j;
      EXPECT_EQ(Bits(min[j]), Bits(min2[j])) << j;
    }
  }
}

}  // namespace
}  // namespace crossreg::quant::internal
