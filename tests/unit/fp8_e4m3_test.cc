// The e4m3 codec that the CUDA backend's FP8 weights must reproduce bit for bit.
#include "engine/quant/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace crossreg {
namespace {

TEST(Fp8E4M3Test, DecodesTheFormatsLandmarks) {
  EXPECT_EQ(Fp8E4M3ToF32(0x00), 0.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(Fp8E4M3ToF32(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(Fp8E4M3ToF32(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(Fp8E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0x39), 1.125f);
  EXPECT_EQ(Fp8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(Fp8E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(Fp8E4M3ToF32(0xff)));
}

TEST(Fp8E4M3Test, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = Fp8E4M3ToF32(static_cast<uint8_t>(c));
    if (c == 0x80) {  // -0 keeps its sign
      EXPECT_EQ(F32ToFp8E4M3(v), 0x80);
      continue;
    }
    EXPECT_EQ(F32ToFp8E4M3(v), c) << "code " << c << " value " << v;
  }
}

TEST(Fp8E4M3Test, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(F32ToFp8E4M3(1.0625f), 0x38);   // halfway between 1 and 1.125: even (1)
  EXPECT_EQ(F32ToFp8E4M3(1.1875f), 0x3a);   // halfway between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(F32ToFp8E4M3(1.07f), 0x39);
  EXPECT_EQ(F32ToFp8E4M3(0.5f * 0x1p-9f), 0x00);   // half the smallest subnormal: even (0)
  EXPECT_EQ(F32ToFp8E4M3(1.5f * 0x1p-9f), 0x02);   // between 1 and 2 ulps: even (2)
  EXPECT_EQ(F32ToFp8E4M3(7.5f * 0x1p-9f), 0x08);   // rounds up into the normals
  EXPECT_EQ(F32ToFp8E4M3(15.5f), 0x58);             // 15.5 -> 16 (mantissa carries into the exponent)
  EXPECT_EQ(F32ToFp8E4M3(460.0f), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(1e30f), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(-1e30f), 0xfe);
  EXPECT_EQ(F32ToFp8E4M3(INFINITY), 0x7e);
  EXPECT_EQ(F32ToFp8E4M3(NAN) & 0x7f, 0x7f);
}

TEST(Fp8E4M3Test, RoundingErrorIsAtMostHalfAnUlp) {
  for (float x = 0x1p-6f; x < 448.0f; x *= 1.0137f) {
    const float q = Fp8E4M3ToF32(F32ToFp8E4M3(x));
    EXPECT_LE(std::fabs(q - x), std::fabs(x) / 16.0f + 1e-12f) << x;  // 3 mantissa bits: ulp/2 <= 2^-4 · x
  }
}

TEST(Fp8E4M3Test, RowScaleUsesTheWholeRange) {
  const std::vector<float> w = {0.01f, -0.25f, 0.125f, 0.0f, 0.2f};
  std::vector<uint8_t> codes(w.size());
  const float scale = QuantizeRowFp8E4M3(w.data(), static_cast<int64_t>(w.size()), codes.data());
  EXPECT_FLOAT_EQ(scale, 0.25f / 448.0f);
  EXPECT_EQ(codes[1], 0xfe);  // the largest magnitude maps to -448
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(Fp8E4M3ToF32(codes[i]) * scale, w[i], std::fabs(w[i]) / 16.0f + 1e-6f) << i;
  }
  std::vector<float> zeros(4, 0.0f);
  std::vector<uint8_t> zero_codes(4);
  EXPECT_EQ(QuantizeRowFp8E4M3(zeros.data(), 4, zero_codes.data()), 1.0f);
  EXPECT_EQ(zero_codes, std::vector<uint8_t>(4, 0));
}

}  // namespace
}  // namespace crossreg
