// The SIMD linear kernel against the double-precision reference, for every dtype and
// awkward shapes, and a row's result independent of the rows beside it.
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/cpu/linear.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace crossreg::cpu {
namespace {

struct OwnedWeight {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  TensorRef ref;
};

OwnedWeight MakeWeight(DType dtype, int64_t out, int64_t in, Rng& rng) {
  OwnedWeight w;
  w.f32.resize(static_cast<size_t>(out * in));
  for (auto& v : w.f32) v = static_cast<float>(rng.Uniform() * 2 - 1);
  w.ref.dtype = dtype;
  w.ref.shape = {out, in};
  if (dtype == DType::kF32) {
    w.ref.data = w.f32.data();
  } else {
    w.half.resize(w.f32.size());
    for (size_t i = 0; i < w.f32.size(); ++i) {
      w.half[i] = dtype == DType::kBF16 ? F32ToBf16(w.f32[i]) : F32ToF16(w.f32[i]);
    }
    w.ref.data = w.half.data();
  }
  return w;
}

class LinearKernelTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinearKernelTest, MatchesReferenceOnAwkwardShapes) {
  std::printf("SIMD level: %s\n", SimdLevelName(DetectedSimdLevel()));
  Rng rng(3);
  ThreadPool pool(2);
  for (int64_t in : {1, 15, 16, 17, 37, 172, 768}) {
    for (int64_t out : {1, 3, 8, 13, 70}) {
      for (int64_t rows : {1, 2, 3, 4, 5, 9}) {
        auto w = MakeWeight(GetParam(), out, in, rng);
        std::vector<float> x(static_cast<size_t>(rows * in));
        for (auto& v : x) v = static_cast<float>(rng.Uniform() * 2 - 1);
        std::vector<float> y(static_cast<size_t>(rows * out)), ref(y.size());
        Linear(w.ref, x.data(), rows, y.data(), pool);
        LinearReference(w.ref, x.data(), rows, ref.data());
        for (size_t i = 0; i < y.size(); ++i) {
          // f32 accumulation of `in` products of magnitude <= 1.
          ASSERT_NEAR(y[i], ref[i], 1e-6 * in + 1e-6) << "in=" << in << " out=" << out << " rows=" << rows;
        }
      }
    }
  }
}

TEST_P(LinearKernelTest, RowResultDoesNotDependOnBatch) {
  Rng rng(4);
  ThreadPool pool(2);
  const int64_t in = 200, out = 333, rows = 11;
  auto w = MakeWeight(GetParam(), out, in, rng);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (auto& v : x) v = static_cast<float>(rng.Uniform() * 2 - 1);
  std::vector<float> batched(static_cast<size_t>(rows * out));
  Linear(w.ref, x.data(), rows, batched.data(), pool);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> alone(static_cast<size_t>(out));
    Linear(w.ref, x.data() + r * in, 1, alone.data(), pool);
    EXPECT_EQ(std::memcmp(alone.data(), batched.data() + r * out, sizeof(float) * out), 0) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearKernelTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(DTypeTest, HalfConversionsRoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1e-5f, 5.96e-8f, 3.14159f}) {
    EXPECT_NEAR(F16ToF32(F32ToF16(v)), v, std::fabs(v) * 1e-3 + 1e-7) << v;
    EXPECT_NEAR(Bf16ToF32(F32ToBf16(v)), v, std::fabs(v) * 8e-3) << v;
  }
  EXPECT_TRUE(std::isinf(F16ToF32(F32ToF16(1e6f))));
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(NAN))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 100, 1001}) {
    for (int64_t grain : {1, 4, 16}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % grain, 0);
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int h : hits) ASSERT_EQ(h, 1);
    }
  }
}

}  // namespace
}  // namespace crossreg::cpu
