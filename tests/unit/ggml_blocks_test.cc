#include "engine/quant/ggml_blocks.h"

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace crossreg {
namespace {

using quant::BlockCodes;
using quant::CodesOf;
using quant::DecodeBlock;
using quant::Dequantize;
using quant::Quantize;

constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K,
                                  DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL,
                                  DType::kIQ4_XS};

// f16 bit patterns of a few exact values.
constexpr uint16_t kHalfOne = 0x3c00;
constexpr uint16_t kHalfHalf = 0x3800;          // 0.5
constexpr uint16_t kHalfMinusQuarter = 0xb400;  // -0.25
constexpr uint16_t kHalfTwo = 0x4000;

void PutF16(uint8_t* p, uint16_t bits) {
  p[0] = static_cast<uint8_t>(bits & 0xff);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> DequantizeAll(DType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  Dequantize(type, bytes.data(), out.data(), n);
  return out;
}

// ---- hand-built blocks: bytes written from the layout, values checked one by one ----

TEST(GgmlBlocks, Q8_0HandBuilt) {
  std::vector<uint8_t> block(34);
  PutF16(block.data(), kHalfHalf);
  for (int i = 0; i < 32; ++i) block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(8 * i - 128));
  block[2 + 31] = 127;
  const std::vector<float> y = DequantizeAll(DType::kQ8_0, block, 32);
  for (int i = 0; i < 31; ++i) EXPECT_EQ(y[i], 0.5f * static_cast<float>(8 * i - 128)) << i;
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[31], 63.5f);
}

TEST(GgmlBlocks, Q4_0HandBuilt) {
  std::vector<uint8_t> block(18);
  PutF16(block.data(), kHalfMinusQuarter);
  // Byte i holds element i in its low nibble and element i + 16 in its high nibble.
  for (int i = 0; i < 16; ++i) block[2 + i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const std::vector<float> y = DequantizeAll(DType::kQ4_0, block, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[i], -0.25f * static_cast<float>(i - 8)) << i;
    EXPECT_EQ(y[i + 16], -0.25f * static_cast<float>(7 - i)) << i + 16;
  }
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[16], -1.75f);  // nibble 15

  // One high nibble alone: byte 3's high half is element 19.
  std::vector<uint8_t> single(18, 0x88);  // every nibble 8: every value 0
  PutF16(single.data(), kHalfOne);
  single[2 + 3] = 0xd8;  // high nibble 13
  const std::vector<float> z = DequantizeAll(DType::kQ4_0, single, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(z[i], i == 19 ? 5.0f : 0.0f) << i;
}

// Scales {1, 2, 3, 4, 17, 33, 49, 63} and mins {5, 6, 7, 8, 20, 40, 60, 31} packed by hand:
// bytes 0..3 = scale j | (scale j+4 >> 4) << 6, bytes 4..7 = min j | (min j+4 >> 4) << 6,
// bytes 8..11 = (scale j+4 & 15) | (min j+4 & 15) << 4.
constexpr uint8_t kPackedScales[12] = {0x41, 0x82, 0xc3, 0xc4, 0x45, 0x86, 0xc7, 0x48, 0x41, 0x81, 0xc1, 0xff};
constexpr int kScales[8] = {1, 2, 3, 4, 17, 33, 49, 63};
constexpr int kMins[8] = {5, 6, 7, 8, 20, 40, 60, 31};

int Code5(int e) { return (e * 7 + e / 9) % 32; }

TEST(GgmlBlocks, Q4_KHandBuilt) {
  std::vector<uint8_t> block(144, 0);
  PutF16(block.data(), kHalfOne);       // d
  PutF16(block.data() + 2, kHalfHalf);  // dmin
  std::memcpy(block.data() + 4, kPackedScales, 12);
  uint8_t* qs = block.data() + 16;
  // Each 64 elements use 32 bytes: the first 32 in the low nibbles, the next 32 in the high.
  for (int group = 0; group < 4; ++group) {
    for (int l = 0; l < 32; ++l) {
      const int low = Code5(64 * group + l) & 15, high = Code5(64 * group + 32 + l) & 15;
      qs[32 * group + l] = static_cast<uint8_t>(low | high << 4);
    }
  }
  const std::vector<float> y = DequantizeAll(DType::kQ4_K, block, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], static_cast<float>(kScales[j] * (Code5(e) & 15)) - 0.5f * kMins[j]) << e;
  }

  // One nibble alone: byte 69 is group 2, position 5; its high half is element 165.
  std::vector<uint8_t> single(144, 0);
  PutF16(single.data(), kHalfOne);
  PutF16(single.data() + 2, kHalfHalf);
  std::memcpy(single.data() + 4, kPackedScales, 12);
  single[16 + 69] = 0x50;
  const std::vector<float> z = DequantizeAll(DType::kQ4_K, single, 256);
  for (int e = 0; e < 256; ++e) {
    const float base = -0.5f * kMins[e / 32];
    EXPECT_EQ(z[e], e == 165 ? 5.0f * kScales[5] + base : base) << e;
  }
}

TEST(GgmlBlocks, Q5_KHandBuilt) {
  std::vector<uint8_t> block(176, 0);
  PutF16(block.data(), kHalfHalf);     // d
  PutF16(block.data() + 2, kHalfTwo);  // dmin
  std::memcpy(block.data() + 4, kPackedScales, 12);
  uint8_t* qh = block.data() + 16;
  uint8_t* qs = block.data() + 48;
  for (int group = 0; group < 4; ++group) {
    for (int l = 0; l < 32; ++l) {
      const int first = Code5(64 * group + l), second = Code5(64 * group + 32 + l);
      qs[32 * group + l] = static_cast<uint8_t>((first & 15) | (second & 15) << 4);
      // Sub-block j's fifth bits are bit j of qh[0..31].
      qh[l] |= static_cast<uint8_t>((first >> 4) << (2 * group) | (second >> 4) << (2 * group + 1));
    }
  }
  const std::vector<float> y = DequantizeAll(DType::kQ5_K, block, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(kScales[j] * Code5(e)) - 2.0f * kMins[j]) << e;
  }

  // One fifth bit alone: qh[7] bit 6 is sub-block 6, position 7: element 199.
  std::vector<uint8_t> single(176, 0);
  PutF16(single.data(), kHalfHalf);
  PutF16(single.data() + 2, kHalfTwo);
  std::memcpy(single.data() + 4, kPackedScales, 12);
  single[16 + 7] = 1 << 6;
  const std::vector<float> z = DequantizeAll(DType::kQ5_K, single, 256);
  for (int e = 0; e < 256; ++e) {
    const float base = -2.0f * kMins[e / 32];
    EXPECT_EQ(z[e], e == 199 ? 0.5f * 16.0f * kScales[6] + base : base) << e;
  }
}

constexpr int8_t kQ6Scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 16, -32, 64, -64, 100, -100, 127, -128};

int Code6(int e) { return (e * 11 + 3 + e / 13) % 64; }

TEST(GgmlBlocks, Q6_KHandBuilt) {
  std::vector<uint8_t> block(210, 0);
  uint8_t* ql = block.data();
  uint8_t* qh = block.data() + 128;
  std::memcpy(block.data() + 192, kQ6Scales, 16);
  PutF16(block.data() + 208, kHalfHalf);
  // Per 128 elements: 64 ql bytes (elements l and l+32 low nibbles, l+64 and l+96 high
  // nibbles of bytes l and l+32) and 32 qh bytes (two bits each of l, l+32, l+64, l+96).
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int base = 128 * half + l;
      const int a = Code6(base), b = Code6(base + 32), c = Code6(base + 64), d = Code6(base + 96);
      ql[64 * half + l] = static_cast<uint8_t>((a & 15) | (c & 15) << 4);
      ql[64 * half + l + 32] = static_cast<uint8_t>((b & 15) | (d & 15) << 4);
      qh[32 * half + l] = static_cast<uint8_t>((a >> 4) | (b >> 4) << 2 | (c >> 4) << 4 | (d >> 4) << 6);
    }
  }
  const std::vector<float> y = DequantizeAll(DType::kQ6_K, block, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(kQ6Scales[e / 16] * (Code6(e) - 32))) << e;
  }

  // Single fields: ql[104]'s high nibble is element 232 (second half, l = 8, fourth
  // quarter); qh[42] bits 2-3 are element 170 (second half, l = 10, second quarter).
  std::vector<uint8_t> single(210, 0);
  std::memcpy(single.data() + 192, kQ6Scales, 16);
  PutF16(single.data() + 208, kHalfOne);
  single[104] = 0x70;
  single[128 + 42] = 0x0c;
  const std::vector<float> z = DequantizeAll(DType::kQ6_K, single, 256);
  for (int e = 0; e < 256; ++e) {
    int q = 0;
    if (e == 232) q = 7;
    if (e == 170) q = 48;
    EXPECT_EQ(z[e], static_cast<float>(kQ6Scales[e / 16] * (q - 32))) << e;
  }
}

// The 32-element formats with a fifth bit keep element e's in bit e of a little-endian
// uint32: here elements 0, 20 and 31.
constexpr uint8_t kFifthBits[4] = {0x01, 0x00, 0x10, 0x80};
bool FifthBit(int e) { return e == 0 || e == 20 || e == 31; }
// Byte i of qs holds element i in its low nibble and element i + 16 in its high one.
int LegacyNibbleOf(int e) { return e < 16 ? e : 31 - e; }
void PutLegacyNibbles(uint8_t* qs) {
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
}

TEST(GgmlBlocks, Q4_1HandBuilt) {
  std::vector<uint8_t> block(20);
  PutF16(block.data(), kHalfHalf);              // d
  PutF16(block.data() + 2, kHalfMinusQuarter);  // m
  PutLegacyNibbles(block.data() + 4);
  const std::vector<float> y = DequantizeAll(DType::kQ4_1, block, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * static_cast<float>(LegacyNibbleOf(e)) - 0.25f) << e;
  EXPECT_EQ(y[16], 7.25f);  // nibble 15
}

TEST(GgmlBlocks, Q5_0HandBuilt) {
  std::vector<uint8_t> block(22);
  PutF16(block.data(), kHalfOne);
  std::memcpy(block.data() + 2, kFifthBits, 4);
  PutLegacyNibbles(block.data() + 6);
  const std::vector<float> y = DequantizeAll(DType::kQ5_0, block, 32);
  for (int e = 0; e < 32; ++e) {
    EXPECT_EQ(y[e], static_cast<float>(LegacyNibbleOf(e) + (FifthBit(e) ? 16 : 0) - 16)) << e;
  }
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], -15.0f);
  EXPECT_EQ(y[20], 11.0f);  // nibble 11 and the fifth bit
}

TEST(GgmlBlocks, Q5_1HandBuilt) {
  std::vector<uint8_t> block(24);
  PutF16(block.data(), kHalfHalf);      // d
  PutF16(block.data() + 2, kHalfTwo);   // m
  std::memcpy(block.data() + 4, kFifthBits, 4);
  PutLegacyNibbles(block.data() + 8);
  const std::vector<float> y = DequantizeAll(DType::kQ5_1, block, 32);
  for (int e = 0; e < 32; ++e) {
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(LegacyNibbleOf(e) + (FifthBit(e) ? 16 : 0)) + 2.0f) << e;
  }
  EXPECT_EQ(y[0], 10.0f);
}

// Q2_K's and Q3_K's two low bits: each half of 128 elements has 32 bytes, element
// 128 h + 32 p + l in bits 2p, 2p + 1 of byte 32 h + l.
int Code2(int e) { return (e * 5 + e / 7) % 4; }
void PutTwoBitCodes(uint8_t* qs, int (*code)(int)) {
  for (int e = 0; e < 256; ++e) qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(code(e) << (2 * (e % 128 / 32)));
}

TEST(GgmlBlocks, Q2_KHandBuilt) {
  std::vector<uint8_t> block(84, 0);
  // Sub-block j (16 elements): scale j in the low nibble, min 15 - j in the high one.
  for (int j = 0; j < 16; ++j) block[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  PutTwoBitCodes(block.data() + 16, Code2);
  PutF16(block.data() + 80, kHalfTwo);   // d
  PutF16(block.data() + 82, kHalfHalf);  // dmin
  const std::vector<float> y = DequantizeAll(DType::kQ2_K, block, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 16;
    EXPECT_EQ(y[e], 2.0f * static_cast<float>(j * Code2(e)) - 0.5f * static_cast<float>(15 - j)) << e;
  }

  // One code alone: byte 16 + 37 is half 1, l = 5; bits 4-5 are element 128 + 64 + 5.
  std::vector<uint8_t> single(84, 0);
  for (int j = 0; j < 16; ++j) single[j] = 3;  // scale 3, min 0
  PutF16(single.data() + 80, kHalfOne);
  single[16 + 37] = 2 << 4;
  const std::vector<float> z = DequantizeAll(DType::kQ2_K, single, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(z[e], e == 197 ? 6.0f : 0.0f) << e;
}

// Q3_K's sixteen scales (stored as sc + 32 in 6 bits), laid out by hand: scale i = 4 g + k
// has its low 4 bits in a nibble of byte k (g 0: low, g 2: high) or byte 4 + k (g 1: low,
// g 3: high), its top 2 bits in bits 2g, 2g + 1 of byte 8 + k.
int Q3Scale(int i) { return 4 * i - 31; }  // -31, -27, ..., 29: every top-bit pattern
void PutQ3Scales(uint8_t* s) {
  for (int i = 0; i < 16; ++i) {
    const int v = Q3Scale(i) + 32, k = i % 4, g = i / 4;
    const int byte = g % 2 == 0 ? k : 4 + k;
    s[byte] |= static_cast<uint8_t>((v & 15) << (g < 2 ? 0 : 4));
    s[8 + k] |= static_cast<uint8_t>((v >> 4) << (2 * g));
  }
}
bool ThirdBit(int e) { return (e * 3 + e / 11) % 5 < 2; }

TEST(GgmlBlocks, Q3_KHandBuilt) {
  std::vector<uint8_t> block(110, 0);
  // hmask: element e's bit is bit 4 (e / 128) + (e % 128) / 32 of byte e % 32.
  for (int e = 0; e < 256; ++e) {
    if (ThirdBit(e)) block[e % 32] |= static_cast<uint8_t>(1 << (4 * (e / 128) + e % 128 / 32));
  }
  PutTwoBitCodes(block.data() + 32, Code2);
  PutQ3Scales(block.data() + 96);
  PutF16(block.data() + 108, kHalfHalf);  // d
  const std::vector<float> y = DequantizeAll(DType::kQ3_K, block, 256);
  for (int e = 0; e < 256; ++e) {
    const int q = Code2(e) - (ThirdBit(e) ? 0 : 4);
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(Q3Scale(e / 16)) * static_cast<float>(q)) << e;
  }
  // Spot values: scale 0 is -31; element 0 has code 0 and its third bit (q = 0), element
  // 1 code 1 and no third bit (q = -3).
  EXPECT_TRUE(ThirdBit(0));
  EXPECT_FALSE(ThirdBit(1));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 46.5f);
}

// ggml's IQ4 grid, written out here so the test does not read the code's copy.
constexpr int kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(GgmlBlocks, Iq4NlHandBuilt) {
  std::vector<uint8_t> block(18);
  PutF16(block.data(), kHalfHalf);
  PutLegacyNibbles(block.data() + 2);
  const std::vector<float> y = DequantizeAll(DType::kIQ4_NL, block, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 0.5f * static_cast<float>(kIq4Grid[LegacyNibbleOf(e)])) << e;
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);  // nibble 15: 113
}

TEST(GgmlBlocks, Iq4XsHandBuilt) {
  std::vector<uint8_t> block(136, 0);
  PutF16(block.data(), kHalfOne);
  // Sub-block j's scale is stored + 32 in 6 bits: low nibble j % 2 of byte 4 + j / 2, top
  // two bits at bit 2j of the little-endian uint16 at byte 2. Scales -32, -23, ..., 31.
  auto scale_of = [](int j) { return 9 * j - 32; };
  uint16_t high = 0;
  for (int j = 0; j < 8; ++j) {
    const int v = scale_of(j) + 32;
    block[4 + j / 2] |= static_cast<uint8_t>((v & 15) << (4 * (j % 2)));
    high |= static_cast<uint16_t>((v >> 4) << (2 * j));
  }
  PutF16(block.data() + 2, high);
  // Each sub-block's 32 nibbles as IQ4_NL's, in 16 bytes of qs at byte 8 + 16 j.
  for (int j = 0; j < 8; ++j) PutLegacyNibbles(block.data() + 8 + 16 * j);
  block[8 + 16 * 3 + 5] = 0x9c;  // sub-block 3: element 5 nibble 12, element 21 nibble 9
  const std::vector<float> y = DequantizeAll(DType::kIQ4_XS, block, 256);
  for (int e = 0; e < 256; ++e) {
    int nibble = LegacyNibbleOf(e % 32);
    if (e == 3 * 32 + 5) nibble = 12;
    if (e == 3 * 32 + 21) nibble = 9;
    EXPECT_EQ(y[e], static_cast<float>(scale_of(e / 32) * kIq4Grid[nibble])) << e;
  }
}

TEST(GgmlBlocks, MultipleBlocksAdvanceByBlockBytes) {
  // Two Q8_0 blocks: the second's scale and codes must land in elements 32..63.
  std::vector<uint8_t> blocks(68, 0);
  PutF16(blocks.data(), kHalfOne);
  PutF16(blocks.data() + 34, kHalfTwo);
  for (int i = 0; i < 32; ++i) {
    blocks[2 + i] = static_cast<uint8_t>(i);
    blocks[36 + i] = static_cast<uint8_t>(-i);
  }
  const std::vector<float> y = DequantizeAll(DType::kQ8_0, blocks, 64);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(y[i], static_cast<float>(i));
    EXPECT_EQ(y[32 + i], -2.0f * i);
  }
}

// ---- DecodeBlock against Dequantize ----

TEST(GgmlBlocks, CodesOfDescribesEachFormat) {
  EXPECT_EQ(CodesOf(DType::kQ8_0).sub_block, 32);
  EXPECT_FALSE(CodesOf(DType::kQ8_0).has_min);
  EXPECT_TRUE(CodesOf(DType::kQ8_0).signed_quants);
  EXPECT_EQ(CodesOf(DType::kQ4_0).sub_block, 32);
  EXPECT_TRUE(CodesOf(DType::kQ4_0).has_min);
  EXPECT_FALSE(CodesOf(DType::kQ4_0).signed_quants);
  for (DType t : {DType::kQ4_K, DType::kQ5_K}) {
    EXPECT_EQ(CodesOf(t).sub_block, 32);
    EXPECT_TRUE(CodesOf(t).has_min);
    EXPECT_FALSE(CodesOf(t).signed_quants);
  }
  EXPECT_EQ(CodesOf(DType::kQ6_K).sub_block, 16);
  EXPECT_FALSE(CodesOf(DType::kQ6_K).has_min);
  EXPECT_TRUE(CodesOf(DType::kQ6_K).signed_quants);
  EXPECT_EQ(CodesOf(DType::kQ8_0).max_abs_quant, 128);
  EXPECT_EQ(CodesOf(DType::kQ4_0).max_abs_quant, 15);
  EXPECT_EQ(CodesOf(DType::kQ4_K).max_abs_quant, 15);
  EXPECT_EQ(CodesOf(DType::kQ5_K).max_abs_quant, 31);
  EXPECT_EQ(CodesOf(DType::kQ6_K).max_abs_quant, 32);
  for (DType t : {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    EXPECT_EQ(CodesOf(t).sub_block, 32);
    EXPECT_TRUE(CodesOf(t).has_min);
    EXPECT_FALSE(CodesOf(t).signed_quants);
  }
  EXPECT_EQ(CodesOf(DType::kQ4_1).max_abs_quant, 15);
  EXPECT_EQ(CodesOf(DType::kQ5_0).max_abs_quant, 31);
  EXPECT_EQ(CodesOf(DType::kQ5_1).max_abs_quant, 31);
  EXPECT_EQ(CodesOf(DType::kQ2_K).sub_block, 16);
  EXPECT_TRUE(CodesOf(DType::kQ2_K).has_min);
  EXPECT_FALSE(CodesOf(DType::kQ2_K).signed_quants);
  EXPECT_EQ(CodesOf(DType::kQ2_K).max_abs_quant, 3);
  EXPECT_EQ(CodesOf(DType::kQ3_K).sub_block, 16);
  EXPECT_FALSE(CodesOf(DType::kQ3_K).has_min);
  EXPECT_TRUE(CodesOf(DType::kQ3_K).signed_quants);
  EXPECT_EQ(CodesOf(DType::kQ3_K).max_abs_quant, 4);
  for (DType t : {DType::kIQ4_NL, DType::kIQ4_XS}) {
    EXPECT_EQ(CodesOf(t).sub_block, 32);
    EXPECT_FALSE(CodesOf(t).has_min);
    EXPECT_TRUE(CodesOf(t).signed_quants);
    EXPECT_EQ(CodesOf(t).max_abs_quant, 127);
  }
}

uint16_t RandomFiniteF16(std::mt19937& rng) {
  for (;;) {
    const auto bits = static_cast<uint16_t>(rng());
    if (((bits >> 10) & 0x1f) != 0x1f) return bits;
  }
}

// Random bytes everywhere, then finite f16 values in the scale fields.
std::vector<uint8_t> RandomBlock(DType type, std::mt19937& rng) {
  std::vector<uint8_t> block(DTypeBlockBytes(type));
  for (uint8_t& byte : block) byte = static_cast<uint8_t>(rng());
  switch (type) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      PutF16(block.data(), RandomFiniteF16(rng));
      break;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ4_1:
    case DType::kQ5_1:
      PutF16(block.data(), RandomFiniteF16(rng));
      PutF16(block.data() + 2, RandomFiniteF16(rng));
      break;
    case DType::kQ6_K:
      PutF16(block.data() + 208, RandomFiniteF16(rng));
      break;
    case DType::kQ2_K:
      PutF16(block.data() + 80, RandomFiniteF16(rng));
      PutF16(block.data() + 82, RandomFiniteF16(rng));
      break;
    case DType::kQ3_K:
      PutF16(block.data() + 108, RandomFiniteF16(rng));
      break;
    default:
      break;
  }
  return block;
}

TEST(GgmlBlocks, DecodeBlockMatchesDequantizeBitwise) {
  std::mt19937 rng(1234);
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const BlockCodes codes = CodesOf(type);
    const int elements = static_cast<int>(DTypeBlockElements(type));
    const int sub_blocks = elements / codes.sub_block;
    int min_code = 0, max_code = 15;  // Q4_0, Q4_K
    if (type == DType::kQ8_0) min_code = -128, max_code = 127;
    if (type == DType::kQ5_K || type == DType::kQ5_0 || type == DType::kQ5_1) max_code = 31;
    if (type == DType::kQ6_K) min_code = -32, max_code = 31;
    if (type == DType::kQ2_K) max_code = 3;
    if (type == DType::kQ3_K) min_code = -4, max_code = 3;
    if (type == DType::kIQ4_NL || type == DType::kIQ4_XS) min_code = -127, max_code = 113;
    std::vector<int8_t> q(elements);
    std::vector<float> scale(sub_blocks), min(sub_blocks), reference(elements);
    int mismatches = 0;
    for (int trial = 0; trial < 500; ++trial) {
      const std::vector<uint8_t> block = RandomBlock(type, rng);
      Dequantize(type, block.data(), reference.data(), elements);
      DecodeBlock(type, block.data(), q.data(), scale.data(), min.data());
      for (int j = 0; j < sub_blocks; ++j) {
        if (!codes.has_min) {
          ASSERT_EQ(Bits(min[j]), 0u);
        }
      }
      for (int i = 0; i < elements; ++i) {
        ASSERT_GE(q[i], min_code);
        ASSERT_LE(q[i], max_code);
        // The kernels size their int16 sums by max_abs_quant.
        ASSERT_LE(std::abs(static_cast<int>(q[i])), codes.max_abs_quant);
        const int j = i / codes.sub_block;
        const float product = scale[j] * static_cast<float>(q[i]);
        const float value = product - min[j];
        if (Bits(value) != Bits(reference[i]) && ++mismatches <= 5) {
          ADD_FAILURE() << "trial " << trial << " element " << i << ": " << value << " != " << reference[i];
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// ---- Quantize ----

std::vector<float> Gaussian(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> RoundTrip(DType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> bytes(DTypeBytes(type, n));
  Quantize(type, x.data(), bytes.data(), n);
  return DequantizeAll(type, bytes, n);
}

double RelativeRms(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// Relative RMS error bounds on Gaussian data; measured (64 super-blocks, two scales of
// data, sigma 1 and 0.02) Q8_0 0.53%, Q4_0 8.56%, Q4_1 7.80%, Q5_0 4.23%, Q5_1 3.78%,
// Q2_K 26.5%, Q3_K 14.3%, Q4_K 7.01%, Q5_K 3.48%, Q6_K 1.72%, IQ4_NL 7.37%, IQ4_XS 7.35%.
double ErrorBound(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return 0.008;
    case DType::kQ4_0:
      return 0.11;
    case DType::kQ4_K:
      return 0.09;
    case DType::kQ5_K:
      return 0.045;
    case DType::kQ6_K:
      return 0.025;
    case DType::kQ4_1:
      return 0.1;
    case DType::kQ5_0:
      return 0.055;
    case DType::kQ5_1:
      return 0.05;
    case DType::kQ2_K:
      return 0.33;
    case DType::kQ3_K:
      return 0.18;
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return 0.095;
    default:
      return 0;
  }
}

TEST(GgmlBlocks, QuantizeErrorOnGaussianData) {
  for (DType type : kQuantTypes) {
    for (float sigma : {1.0f, 0.02f}) {
      const std::vector<float> x = Gaussian(256 * 64, sigma, 7);
      const double rms = RelativeRms(x, RoundTrip(type, x));
      std::printf("%s sigma %.2f: relative RMS error %.4f%%\n", std::string(DTypeName(type)).c_str(), sigma, 100 * rms);
      EXPECT_LT(rms, ErrorBound(type)) << DTypeName(type) << " sigma " << sigma;
    }
  }
}

TEST(GgmlBlocks, QuantizeOneBlockAndBlocksAreIndependent) {
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const int64_t block = DTypeBlockElements(type);
    const size_t block_bytes = DTypeBlockBytes(type);
    const std::vector<float> one = Gaussian(block, 1.0f, 3);
    EXPECT_LT(RelativeRms(one, RoundTrip(type, one)), ErrorBound(type) * 1.5);

    // Five blocks at once give the bytes of five single-block calls.
    const std::vector<float> x = Gaussian(5 * block, 1.0f, 11);
    std::vector<uint8_t> together(DTypeBytes(type, 5 * block));
    Quantize(type, x.data(), together.data(), 5 * block);
    for (int b = 0; b < 5; ++b) {
      std::vector<uint8_t> alone(block_bytes);
      Quantize(type, x.data() + b * block, alone.data(), block);
      EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + b * block_bytes, block_bytes)) << b;
    }
  }
}

TEST(GgmlBlocks, QuantizeZeroInput) {
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const std::vector<float> x(static_cast<size_t>(3 * DTypeBlockElements(type)), 0.0f);
    for (float v : RoundTrip(type, x)) ASSERT_EQ(v, 0.0f);
  }
}

TEST(GgmlBlocks, QuantizeZeroSubBlockAmongNonZero) {
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const int64_t n = 2 * DTypeBlockElements(type);
    std::vector<float> x = Gaussian(n, 1.0f, 5);
    // Elements 32..63 are zero: whole sub-blocks of every format (a whole block of
    // Q8_0 and Q4_0), which must decode to exactly 0 beside non-zero neighbours.
    for (int i = 32; i < 64; ++i) x[i] = 0.0f;
    const std::vector<float> y = RoundTrip(type, x);
    for (int i = 32; i < 64; ++i) EXPECT_EQ(y[i], 0.0f) << i;
    // The formats with a zero code hold an exact 0 inside a non-zero block too (Q4_0:
    // code 8); IQ4's grid has no 0 (its nearest values are 1 and -10 steps).
    const bool iq4 = type == DType::kIQ4_NL || type == DType::kIQ4_XS;
    if ((!CodesOf(type).has_min || type == DType::kQ4_0) && !iq4) {
      std::vector<float> partly = Gaussian(n, 1.0f, 6);
      for (int i = 3; i < 9; ++i) partly[i] = 0.0f;
      const std::vector<float> z = RoundTrip(type, partly);
      for (int i = 3; i < 9; ++i) EXPECT_EQ(z[i], 0.0f) << i;
    }
    EXPECT_LT(RelativeRms(x, y), ErrorBound(type) * 1.5);
  }
}

TEST(GgmlBlocks, QuantizeConstantBlocks) {
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    for (float c : {0.7f, -0.7f, 50.0f}) {
      const std::vector<float> x(static_cast<size_t>(DTypeBlockElements(type)), c);
      for (float v : RoundTrip(type, x)) ASSERT_NEAR(v, c, std::fabs(c) * 2e-3f) << c;
    }
    // Small enough that the block's f16 scale is subnormal, with few significant bits
    // (Q6_K's scale of 1e-4 / 32 / 128 is below half the smallest subnormal, 6e-8,
    // unless rounded up): coarser, but never flushed to zero.
    for (float c : {3e-3f, -3e-3f, 1e-4f}) {
      const std::vector<float> x(static_cast<size_t>(DTypeBlockElements(type)), c);
      for (float v : RoundTrip(type, x)) ASSERT_NEAR(v, c, std::fabs(c) * 0.03f) << c;
    }
  }
}

TEST(GgmlBlocks, QuantizeNonFiniteAndHugeInputStaysFinite) {
  for (DType type : kQuantTypes) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const int64_t n = 2 * DTypeBlockElements(type);
    std::vector<float> x = Gaussian(n, 1.0f, 9);
    std::vector<float> expected = x;
    x[3] = std::nanf("");
    x[40] = INFINITY;
    x[n - 1] = -INFINITY;
    expected[3] = expected[40] = expected[n - 1] = 0.0f;  // read as zero
    const std::vector<float> y = RoundTrip(type, x);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(RelativeRms(expected, y), ErrorBound(type) * 1.5);

    // Beyond what f16 scales can express: clipped, still finite.
    std::vector<float> huge(static_cast<size_t>(n), 1e30f);
    huge[1] = -3e38f;
    for (float v : RoundTrip(type, huge)) ASSERT_TRUE(std::isfinite(v));
  }
}

// ggml's reference quantizers for Q8_0 and Q4_0, on values where the scale is 1.
TEST(GgmlBlocks, Q8_0MatchesReferenceRounding) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // absmax 127: d = 1
  x[1] = -127.0f;
  x[2] = 2.5f;  // halves round away from zero
  x[3] = -2.5f;
  x[4] = 0.49f;
  x[5] = -100.51f;
  std::vector<uint8_t> block(34);
  Quantize(DType::kQ8_0, x.data(), block.data(), 32);
  EXPECT_EQ(block[0], 0x00);
  EXPECT_EQ(block[1], 0x3c);  // d = 1.0
  const auto* qs = reinterpret_cast<const int8_t*>(block.data() + 2);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], -127);
  EXPECT_EQ(qs[2], 3);
  EXPECT_EQ(qs[3], -3);
  EXPECT_EQ(qs[4], 0);
  EXPECT_EQ(qs[5], -101);
  for (int i = 6; i < 32; ++i) EXPECT_EQ(qs[i], 0);
}

TEST(GgmlBlocks, Q4_0MatchesReferenceRounding) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // largest magnitude maps to code 0: d = -8 / -8 = 1
  x[1] = 7.0f;    // code 15
  x[2] = 0.5f;    // halves round up: code 9
  x[3] = -1.5f;   // code 7
  x[16] = -0.6f;  // code 7, high nibble of byte 0
  x[17] = 7.9f;   // past the top: clipped to 15
  std::vector<uint8_t> block(18);
  Quantize(DType::kQ4_0, x.data(), block.data(), 32);
  EXPECT_EQ(block[0], 0x00);
  EXPECT_EQ(block[1], 0x3c);  // d = 1.0
  const uint8_t* qs = block.data() + 2;
  EXPECT_EQ(qs[0], 0x70);
  EXPECT_EQ(qs[1], 0xff);
  EXPECT_EQ(qs[2], 0x89);  // zeros are code 8
  EXPECT_EQ(qs[3], 0x87);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(qs[i], 0x88) << i;

  // A positive extreme gives a negative d, so it too takes code 0.
  std::vector<float> positive(32, 1.0f);
  positive[5] = 4.0f;
  Quantize(DType::kQ4_0, positive.data(), block.data(), 32);
  EXPECT_EQ(block[0], 0x00);
  EXPECT_EQ(block[1], 0xb8);  // d = -0.5
  EXPECT_EQ(block[2 + 5] & 15, 0);
  EXPECT_EQ(block[2 + 0] & 15, 6);  // 1 / -0.5 + 8
}

}  // namespace
}  // namespace crossreg
