#include "engine/quant/ggml_blocks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/quant/sub_block_fit.h"

namespace crossreg::quant {
namespace {

using internal::BestCode;
using internal::Inverse;
using internal::RoundClamped;

// Byte offsets inside each block (the layouts in the header).
constexpr int kQ8_0Qs = 2;
constexpr int kQ4_0Qs = 2;
constexpr int kKDmin = 2;  // Q4_K and Q5_K: d at 0, dmin at 2, scales at 4
constexpr int kKScales = 4;
constexpr int kQ4KQs = 16;
constexpr int kQ5KQh = 16;
constexpr int kQ5KQs = 48;
constexpr int kQ6KQh = 128;
constexpr int kQ6KScales = 192;
constexpr int kQ6KD = 208;
constexpr int kQ4_1Qs = 4;  // Q4_1 and Q5_1: d at 0, m at 2
constexpr int kQ5_0Qh = 2;
constexpr int kQ5_0Qs = 6;
constexpr int kQ5_1Qh = 4;
constexpr int kQ5_1Qs = 8;
constexpr int kQ2KQs = 16;  // Q2_K: scales at 0
constexpr int kQ2KD = 80;
constexpr int kQ2KDmin = 82;
constexpr int kQ3KQs = 32;  // Q3_K: hmask at 0
constexpr int kQ3KScales = 96;
constexpr int kQ3KD = 108;
constexpr int kIq4NlQs = 2;     // IQ4_NL: d at 0
constexpr int kIq4XsScalesH = 2;  // IQ4_XS: d at 0, a uint16 of scales' top bits, 4 bytes of low nibbles
constexpr int kIq4XsScalesL = 4;
constexpr int kIq4XsQs = 8;
// The 16 values IQ4_NL's and IQ4_XS's nibbles index (ggml's non-linear 4-bit grid).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

constexpr int kSuperBlock = 256;
constexpr int kSubBlocksK = 8;     // Q4_K/Q5_K: sub-blocks of 32
constexpr int kSubBlocksQ6K = 16;  // Q6_K: sub-blocks of 16
constexpr int kSubBlocks16 = 16;   // Q2_K and Q3_K: sub-blocks of 16 too
constexpr float kLargestF16 = 65504.0f;
// Finite inputs are clipped here so that sums of squares over a block stay finite.
constexpr float kLargestInput = 1099511627776.0f;  // 2^40

// GGUF is little-endian; reading bytes keeps this independent of the host's order.
uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
float LoadF16(const uint8_t* p) { return F16ToF32(LoadU16(p)); }
void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// Rounds to f16 with the magnitude capped at the largest finite half, so a stored
// scale is never infinite; returns the stored bits.
uint16_t ToF16Saturated(float v) { return F32ToF16(std::clamp(v, -kLargestF16, kLargestF16)); }

// The f16 at or just beyond v in magnitude, for a super-block scale: rounding it down
// would push the largest sub-block scale past the top of its 6- or 8-bit range and clip
// the block's extreme values. That matters where the scale is an f16 subnormal (below
// 6.1e-5, with few significant bits), which small weights reach.
uint16_t ToF16NotSmaller(float v) {
  uint16_t bits = ToF16Saturated(v);
  // Sign and magnitude: one more in the low bits is one step further from zero.
  if (std::fabs(F16ToF32(bits)) < std::fabs(v) && (bits & 0x7fff) < 0x7bff) ++bits;
  return bits;
}

float SanitizedInput(float v) {
  if (!std::isfinite(v)) return 0.0f;
  return std::clamp(v, -kLargestInput, kLargestInput);
}

// ggml's packing of eight 6-bit scales and eight 6-bit mins into 12 bytes: the first
// four of each fill the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); the last four
// keep their low 4 bits in bytes 8..11 (scale low nibble, min high nibble) and their top
// 2 bits in the spare top bits of bytes 0..3 (scales) and 4..7 (mins).
void UnpackScaleMin(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 15) | (packed[j - 4] >> 6) << 4;
    *min = (packed[j + 4] >> 4) | (packed[j] >> 6) << 4;
  }
}

void PackScalesMins(const int* scales, const int* mins, uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scales[j] | (scales[j + 4] >> 4) << 6);
    packed[j + 4] = static_cast<uint8_t>(mins[j] | (mins[j + 4] >> 4) << 6);
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 15) | (mins[j + 4] & 15) << 4);
  }
}

// Where element e's bits live, shared by DecodeBlock and the quantizers (Dequantize
// walks the layout on its own, so the two readings check each other in the tests).
int Q4KNibbleByte(int e) { return 32 * (e / 64) + e % 32; }
int Q4KNibbleShift(int e) { return 4 * ((e / 32) & 1); }
int Q5KHighBit(int e) { return e / 32; }  // bit of qh[e % 32]
int Q6KLowByte(int e) { return 64 * (e / 128) + 32 * ((e % 128 / 32) & 1) + e % 32; }
int Q6KLowShift(int e) { return 4 * (e % 128 / 64); }
int Q6KHighByte(int e) { return 32 * (e / 128) + e % 32; }
int Q6KHighShift(int e) { return 2 * (e % 128 / 32); }
// Q4_0, Q4_1, Q5_0, Q5_1: elements 0..15 in the low nibbles of qs, 16..31 in the high ones;
// Q5_0 and Q5_1 keep element e's fifth bit in bit e of the 32-bit qh.
int LegacyNibble(const uint8_t* qs, int e) { return (qs[e % 16] >> (4 * (e / 16))) & 15; }
// IQ4_XS: sub-block j's 6-bit scale (stored + 32), its low 4 bits a nibble of the low
// bytes, its top 2 bits two of the uint16.
int Iq4XsScale(const uint8_t* b, int j) {
  const int low = (b[kIq4XsScalesL + j / 2] >> (4 * (j % 2))) & 15;
  const int high = (LoadU16(b + kIq4XsScalesH) >> (2 * j)) & 3;
  return (low | high << 4) - 32;
}
// Q2_K and Q3_K: element e's two low bits, and Q3_K's third bit (a bit of hmask[e % 32]).
int Q2KByte(int e) { return 32 * (e / 128) + e % 32; }
int Q2KShift(int e) { return 2 * (e % 128 / 32); }
int Q3KHighBit(int e) { return 4 * (e / 128) + e % 128 / 32; }

// Q3_K's sixteen 6-bit scales (stored + 32) in 12 bytes: scale i = 4 * group + k keeps its
// low 4 bits in a nibble of bytes 0..7 (groups 0 and 1 in the low nibbles of bytes 0..3
// and 4..7, groups 2 and 3 in their high nibbles) and its top 2 bits in byte 8 + k, two
// bits per group.
int Q3KScale(const uint8_t* packed, int i) {
  const int k = i % 4, group = i / 4;
  const int low = (packed[k + 4 * (group % 2)] >> (4 * (group / 2))) & 15;
  const int high = (packed[8 + k] >> (2 * group)) & 3;
  return (low | high << 4) - 32;
}

void PackQ3KScales(const int* scales, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int i = 0; i < kSubBlocks16; ++i) {
    const int k = i % 4, group = i / 4;
    const int v = scales[i] + 32;
    packed[k + 4 * (group % 2)] |= static_cast<uint8_t>((v & 15) << (4 * (group / 2)));
    packed[8 + k] |= static_cast<uint8_t>((v >> 4) << (2 * group));
  }
}

// ---- Dequantize, one block each, following the byte order of the layout ----

void DequantizeQ8_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + kQ8_0Qs);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(qs[i]);
}

void DequantizeQ4_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  // d*q - 8*d rather than d*(q - 8): the same value (both products are exact, d having
  // 11 significant bits and q at most 4), and the form the integer kernels use.
  const float offset = 8.0f * d;
  const uint8_t* qs = b + kQ4_0Qs;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(qs[i] & 15) - offset;
    y[i + 16] = d * static_cast<float>(qs[i] >> 4) - offset;
  }
}

// Q4_1 and Q5_1 (qh null for Q4_1): x = d * q + m.
void DequantizeWithOffset(const uint8_t* b, const uint8_t* qs, const uint8_t* qh, float* y) {
  const float d = LoadF16(b);
  const float m = LoadF16(b + 2);
  const uint32_t high = qh != nullptr ? LoadU32(qh) : 0;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 15) | static_cast<int>((high >> i) & 1) << 4;
    const int hi = (qs[i] >> 4) | static_cast<int>((high >> (i + 16)) & 1) << 4;
    y[i] = d * static_cast<float>(lo) + m;
    y[i + 16] = d * static_cast<float>(hi) + m;
  }
}

void DequantizeQ5_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const uint32_t high = LoadU32(b + kQ5_0Qh);
  // d*q - 16*d, exact as Q4_0's (q has at most 5 bits).
  const float offset = 16.0f * d;
  const uint8_t* qs = b + kQ5_0Qs;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((qs[i] & 15) | ((high >> i) & 1) << 4) - offset;
    y[i + 16] = d * static_cast<float>((qs[i] >> 4) | ((high >> (i + 16)) & 1) << 4) - offset;
  }
}

// Q2_K: per half of 128, four passes over its 32 code bytes, two bits each, every 16
// elements with their own 4-bit scale (low nibble) and min (high nibble).
void DequantizeQ2_K(const uint8_t* b, float* y) {
  const float d = LoadF16(b + kQ2KD);
  const float dmin = LoadF16(b + kQ2KDmin);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = b + kQ2KQs + 32 * h;
    for (int pass = 0; pass < 4; ++pass) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = b[8 * h + 2 * pass + part];
        const float scale = d * static_cast<float>(sc & 15);
        const float min = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          y[128 * h + 32 * pass + 16 * part + l] =
              scale * static_cast<float>((q[16 * part + l] >> (2 * pass)) & 3) - min;
        }
      }
    }
  }
}

// Q3_K: as Q2_K's codes, less 4 where the element's bit in hmask is clear; signed 6-bit
// scales, no mins.
void DequantizeQ3_K(const uint8_t* b, float* y) {
  const float d = LoadF16(b + kQ3KD);
  int scales[kSubBlocks16];
  for (int i = 0; i < kSubBlocks16; ++i) scales[i] = Q3KScale(b + kQ3KScales, i);
  const uint8_t* hmask = b;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = b + kQ3KQs + 32 * h;
    for (int pass = 0; pass < 4; ++pass) {
      const int bit = 4 * h + pass;
      for (int part = 0; part < 2; ++part) {
        const float scale = d * static_cast<float>(scales[8 * h + 2 * pass + part]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int code = ((q[l] >> (2 * pass)) & 3) - (((hmask[l] >> bit) & 1) ? 0 : 4);
          y[128 * h + 32 * pass + l] = scale * static_cast<float>(code);
        }
      }
    }
  }
}

// IQ4_NL (one sub-block) and IQ4_XS (eight): each 32 elements' nibbles as Q4_0's, the
// value d * table[nibble] with d per sub-block.
void DequantizeIq4(const float* scales, const uint8_t* qs, int sub_blocks, float* y) {
  for (int j = 0; j < sub_blocks; ++j) {
    for (int i = 0; i < 16; ++i) {
      y[32 * j + i] = scales[j] * static_cast<float>(kIq4Values[qs[16 * j + i] & 15]);
      y[32 * j + i + 16] = scales[j] * static_cast<float>(kIq4Values[qs[16 * j + i] >> 4]);
    }
  }
}

// Q4_K and Q5_K (qh null for Q4_K): 64 elements per 32 bytes of qs, low nibbles first.
void DequantizeKQuant(const uint8_t* b, const uint8_t* qs, const uint8_t* qh, float* y) {
  const float d = LoadF16(b);
  const float dmin = LoadF16(b + kKDmin);
  const uint8_t* packed = b + kKScales;
  for (int group = 0; group < 4; ++group) {
    for (int half = 0; half < 2; ++half) {
      const int j = 2 * group + half;
      int sc, m;
      UnpackScaleMin(packed, j, &sc, &m);
      const float scale = d * static_cast<float>(sc);
      const float min = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * group + l] >> (4 * half)) & 15;
        if (qh != nullptr) q |= ((qh[l] >> j) & 1) << 4;
        y[64 * group + 32 * half + l] = scale * static_cast<float>(q) - min;
      }
    }
  }
}

void DequantizeQ6_K(const uint8_t* b, float* y) {
  const float d = LoadF16(b + kQ6KD);
  const auto* scales = reinterpret_cast<const int8_t*>(b + kQ6KScales);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + kQ6KQh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      // The four elements l, l+32, l+64, l+96 of this half share qh[l], two bits each.
      const int q[4] = {
          (ql[l] & 15) | (qh[l] & 3) << 4,
          (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4,
          (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4,
          (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4,
      };
      for (int k = 0; k < 4; ++k) {
        const int e = 128 * h + 32 * k + l;
        const float scale = d * static_cast<float>(scales[e / 16]);
        y[e] = scale * static_cast<float>(q[k] - 32);
      }
    }
  }
}

// ---- Quantize, one block each ----

void QuantizeQ8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = std::min(amax / 127.0f, kLargestF16);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(b, ToF16Saturated(d));
  auto* qs = reinterpret_cast<int8_t*>(b + kQ8_0Qs);
  for (int i = 0; i < 32; ++i) qs[i] = static_cast<int8_t>(RoundClamped(x[i] * inv_d, -127, 127));
}

void QuantizeQ4_0(const float* x, uint8_t* b) {
  // The value of largest magnitude maps to -8, the end of the range with one more step.
  float extreme = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  const float d = std::clamp(extreme / -8.0f, -kLargestF16, kLargestF16);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(b, ToF16Saturated(d));
  auto code = [&](float v) {
    // +8.5 then floor: round half up, the reference quantizer's rounding.
    const float shifted = std::clamp(v * inv_d + 8.5f, 0.0f, 15.0f);
    return static_cast<int>(std::floor(shifted));
  };
  uint8_t* qs = b + kQ4_0Qs;
  for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>(code(x[i]) | code(x[i + 16]) << 4);
}

// The K-quants with mins: each of `count` sub-blocks of `sub` elements gets a scale and a
// min, stored as 0..levels steps of the super-block's d and dmin (f16). Q4_K (codes
// 0..15) and Q5_K (0..31): 8 x 32, 6-bit steps; Q2_K (0..3): 16 x 16, 4-bit steps.
// Fills the f16 bits of d and dmin, the steps, and codes[e] (0..nmax); the caller packs them.
struct KQuantFit {
  uint16_t d_bits = 0, dmin_bits = 0;
  int sc[kSubBlocks16] = {}, m[kSubBlocks16] = {};
};

KQuantFit FitKQuantScales(const float* x, int sub, int count, int nmax, int levels, int* codes) {
  float sub_scale[kSubBlocks16], sub_min[kSubBlocks16];
  internal::FitScaleMins(x, sub, count, nmax, sub_scale, sub_min);
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < count; ++j) {
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  KQuantFit fit;
  fit.d_bits = ToF16NotSmaller(max_scale / static_cast<float>(levels));
  fit.dmin_bits = ToF16NotSmaller(max_min / static_cast<float>(levels));
  const float d = F16ToF32(fit.d_bits);
  const float dmin = F16ToF32(fit.dmin_bits);
  // Rounding each fitted scale and min to its step is not always best once the codes can
  // move too (most of all where d is an f16 subnormal, with few significant bits): a
  // step either way is tried for the scale, then for the min, every sub-block at once.
  int* sc = fit.sc;
  int* m = fit.m;
  for (int j = 0; j < count; ++j) {
    sc[j] = d > 0.0f ? RoundClamped(sub_scale[j] / d, 0, levels) : 0;
    m[j] = dmin > 0.0f ? RoundClamped(sub_min[j] / dmin, 0, levels) : 0;
  }
  // Scored three trials, then two, a call (internal::SubBlockErrors reads the sub-blocks
  // in once for a call's trials).
  float scale[3 * kSubBlocks16], min[3 * kSubBlocks16], err[3 * kSubBlocks16], best_err[kSubBlocks16];
  auto set = [&](int t, int j, int sc_try, int m_try) {
    scale[t * count + j] = d * static_cast<float>(sc_try);
    min[t * count + j] = dmin * static_cast<float>(m_try);
  };
  // A step is kept where it fits its sub-block better than everything tried before it.
  auto keep = [&](int* field, int j, int t, int step) {
    if (step < 0 || step > levels || !(err[t * count + j] < best_err[j])) return;
    best_err[j] = err[t * count + j];
    field[j] = step;
  };
  for (int j = 0; j < count; ++j) {
    set(0, j, sc[j], m[j]);
    set(1, j, sc[j] - 1, m[j]);
    set(2, j, sc[j] + 1, m[j]);
  }
  internal::SubBlockErrors(x, sub, count, 3, scale, min, 0, nmax, err);
  for (int j = 0; j < count; ++j) {
    best_err[j] = err[j];
    const int near = sc[j];
    keep(sc, j, 1, near - 1);
    keep(sc, j, 2, near + 1);
  }
  for (int j = 0; j < count; ++j) {
    set(0, j, sc[j], m[j] - 1);
    set(1, j, sc[j], m[j] + 1);
  }
  internal::SubBlockErrors(x, sub, count, 2, scale, min, 0, nmax, err);
  for (int j = 0; j < count; ++j) {
    const int near = m[j];
    keep(m, j, 0, near - 1);
    keep(m, j, 1, near + 1);
  }
  // Codes against the values a decoder will compute.
  for (int j = 0; j < count; ++j) {
    const float scale = d * static_cast<float>(sc[j]);
    const float min = dmin * static_cast<float>(m[j]);
    const float inv_scale = Inverse(scale);
    for (int i = sub * j; i < sub * j + sub; ++i) codes[i] = BestCode(x[i], inv_scale, min, 0, nmax);
  }
  return fit;
}

// Q4_K (nmax 15) and Q5_K (nmax 31): d, dmin and the packed scales stored; codes[e] get
// the 0..nmax codes, which the caller packs.
void QuantizeKQuantScales(const float* x, int nmax, uint8_t* b, int* codes) {
  const KQuantFit fit = FitKQuantScales(x, 32, kSubBlocksK, nmax, 63, codes);
  StoreU16(b, fit.d_bits);
  StoreU16(b + kKDmin, fit.dmin_bits);
  PackScalesMins(fit.sc, fit.m, b + kKScales);
}

void QuantizeQ4_K(const float* x, uint8_t* b) {
  int codes[kSuperBlock];
  QuantizeKQuantScales(x, 15, b, codes);
  uint8_t* qs = b + kQ4KQs;
  std::memset(qs, 0, kSuperBlock / 2);
  for (int e = 0; e < kSuperBlock; ++e) {
    qs[Q4KNibbleByte(e)] |= static_cast<uint8_t>(codes[e] << Q4KNibbleShift(e));
  }
}

void QuantizeQ5_K(const float* x, uint8_t* b) {
  int codes[kSuperBlock];
  QuantizeKQuantScales(x, 31, b, codes);
  uint8_t* qh = b + kQ5KQh;
  uint8_t* qs = b + kQ5KQs;
  std::memset(qh, 0, kSuperBlock / 8);
  std::memset(qs, 0, kSuperBlock / 2);
  for (int e = 0; e < kSuperBlock; ++e) {
    qs[Q4KNibbleByte(e)] |= static_cast<uint8_t>((codes[e] & 15) << Q4KNibbleShift(e));
    qh[e % 32] |= static_cast<uint8_t>((codes[e] >> 4) << Q5KHighBit(e));
  }
}

// Q6_K and Q3_K: each of the 16 sub-blocks of 16 gets a symmetric scale for codes in
// -half..half-1, stored as a signed step count in -steps..steps-1 of the super-block's d.
// As in Q4_0, the largest scale takes the wider (-steps) end, and as for the K-quants'
// 6-bit scales, each sub-block the better neighbour of its rounded step count.
uint16_t FitSignedScales(const float* x, int half, int steps, int* scales) {
  float sub_scale[kSubBlocks16];
  internal::FitSymmetricScales(x, 16, kSubBlocks16, half, sub_scale);
  float extreme = 0.0f;
  for (int j = 0; j < kSubBlocks16; ++j) {
    if (std::fabs(sub_scale[j]) > std::fabs(extreme)) extreme = sub_scale[j];
  }
  const uint16_t d_bits = ToF16NotSmaller(extreme / static_cast<float>(-steps));
  const float d = F16ToF32(d_bits);
  // Each sub-block's rounded step count and a step either way, scored in one call; a step
  // is kept where it fits better than everything tried before it.
  constexpr int kOffset[3] = {0, -1, 1};  // trial t's step count: the rounded one plus kOffset[t]
  float scale[3 * kSubBlocks16], err[3 * kSubBlocks16];
  const float no_min[3 * kSubBlocks16] = {};
  for (int j = 0; j < kSubBlocks16; ++j) {
    scales[j] = d != 0.0f ? RoundClamped(sub_scale[j] / d, -steps, steps - 1) : 0;
    for (int t = 0; t < 3; ++t) scale[t * kSubBlocks16 + j] = d * static_cast<float>(scales[j] + kOffset[t]);
  }
  internal::SubBlockErrors(x, 16, kSubBlocks16, 3, scale, no_min, -half, half - 1, err);
  for (int j = 0; j < kSubBlocks16; ++j) {
    const int near = scales[j];
    float best_err = err[j];
    for (int t = 1; t < 3; ++t) {
      const int step = near + kOffset[t];
      if (step < -steps || step > steps - 1 || !(err[t * kSubBlocks16 + j] < best_err)) continue;
      best_err = err[t * kSubBlocks16 + j];
      scales[j] = step;
    }
  }
  return d_bits;
}

void QuantizeQ6_K(const float* x, uint8_t* b) {
  int steps[kSubBlocks16];
  const uint16_t d_bits = FitSignedScales(x, 32, 128, steps);
  StoreU16(b + kQ6KD, d_bits);
  const float d = F16ToF32(d_bits);
  auto* scales = reinterpret_cast<int8_t*>(b + kQ6KScales);
  for (int j = 0; j < kSubBlocks16; ++j) scales[j] = static_cast<int8_t>(steps[j]);
  uint8_t* ql = b;
  uint8_t* qh = b + kQ6KQh;
  std::memset(ql, 0, kSuperBlock / 2);
  std::memset(qh, 0, kSuperBlock / 4);
  float inv_scale[kSubBlocks16];
  for (int j = 0; j < kSubBlocks16; ++j) inv_scale[j] = Inverse(d * static_cast<float>(scales[j]));
  for (int e = 0; e < kSuperBlock; ++e) {
    const int q = BestCode(x[e], inv_scale[e / 16], 0.0f, -32, 31) + 32;
    ql[Q6KLowByte(e)] |= static_cast<uint8_t>((q & 15) << Q6KLowShift(e));
    qh[Q6KHighByte(e)] |= static_cast<uint8_t>((q >> 4) << Q6KHighShift(e));
  }
}

// Q4_1 (nmax 15) and Q5_1 (nmax 31): the block's minimum is the offset m and its span
// nmax steps of d, as the reference quantizer has them; the codes are picked against the
// stored (f16) d and m.
void QuantizeWithOffset(const float* x, int nmax, uint8_t* b, uint8_t* qs, uint8_t* qh) {
  float lo = x[0], hi = x[0];
  for (int i = 0; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const uint16_t d_bits = ToF16NotSmaller((hi - lo) / static_cast<float>(nmax));
  const uint16_t m_bits = ToF16Saturated(lo);
  StoreU16(b, d_bits);
  StoreU16(b + 2, m_bits);
  const float d = F16ToF32(d_bits), m = F16ToF32(m_bits);
  const float inv_d = Inverse(d);
  std::memset(qs, 0, 16);
  uint32_t high = 0;
  for (int e = 0; e < 32; ++e) {
    const int q = BestCode(x[e], inv_d, -m, 0, nmax);  // value d * q + m
    qs[e % 16] |= static_cast<uint8_t>((q & 15) << (4 * (e / 16)));
    high |= static_cast<uint32_t>(q >> 4) << e;
  }
  if (qh != nullptr) {
    for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(high >> (8 * i));
  }
}

void QuantizeQ5_0(const float* x, uint8_t* b) {
  // As Q4_0: the value of largest magnitude maps to -16, the end with one more step.
  float extreme = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  const float d = std::clamp(extreme / -16.0f, -kLargestF16, kLargestF16);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(b, ToF16Saturated(d));
  uint8_t* qs = b + kQ5_0Qs;
  std::memset(qs, 0, 16);
  uint32_t high = 0;
  for (int e = 0; e < 32; ++e) {
    // +16.5 then floor: round half up, as Q4_0's reference quantizer.
    const int q = static_cast<int>(std::floor(std::clamp(x[e] * inv_d + 16.5f, 0.0f, 31.0f)));
    qs[e % 16] |= static_cast<uint8_t>((q & 15) << (4 * (e / 16)));
    high |= static_cast<uint32_t>(q >> 4) << e;
  }
  for (int i = 0; i < 4; ++i) b[kQ5_0Qh + i] = static_cast<uint8_t>(high >> (8 * i));
}

void QuantizeQ2_K(const float* x, uint8_t* b) {
  int codes[kSuperBlock];
  const KQuantFit fit = FitKQuantScales(x, 16, kSubBlocks16, 3, 15, codes);
  for (int j = 0; j < kSubBlocks16; ++j) b[j] = static_cast<uint8_t>(fit.sc[j] | fit.m[j] << 4);
  StoreU16(b + kQ2KD, fit.d_bits);
  StoreU16(b + kQ2KDmin, fit.dmin_bits);
  uint8_t* qs = b + kQ2KQs;
  std::memset(qs, 0, kSuperBlock / 4);
  for (int e = 0; e < kSuperBlock; ++e) qs[Q2KByte(e)] |= static_cast<uint8_t>(codes[e] << Q2KShift(e));
}

void QuantizeQ3_K(const float* x, uint8_t* b) {
  int scales[kSubBlocks16];
  const uint16_t d_bits = FitSignedScales(x, 4, 32, scales);
  StoreU16(b + kQ3KD, d_bits);
  const float d = F16ToF32(d_bits);
  PackQ3KScales(scales, b + kQ3KScales);
  uint8_t* hmask = b;
  uint8_t* qs = b + kQ3KQs;
  std::memset(hmask, 0, kSuperBlock / 8);
  std::memset(qs, 0, kSuperBlock / 4);
  float inv_scale[kSubBlocks16];
  for (int j = 0; j < kSubBlocks16; ++j) inv_scale[j] = Inverse(d * static_cast<float>(scales[j]));
  for (int e = 0; e < kSuperBlock; ++e) {
    const int q = BestCode(x[e], inv_scale[e / 16], 0.0f, -4, 3) + 4;  // 0..7: the third bit set means no -4
    qs[Q2KByte(e)] |= static_cast<uint8_t>((q & 3) << Q2KShift(e));
    hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << Q3KHighBit(e));
  }
}

// The IQ4 grid: the table entry nearest x / scale, and the squared error of 32 values at
// their nearest entries.
int NearestIq4Code(float x, float scale) {
  int best = 0;
  float best_err = INFINITY;
  for (int c = 0; c < 16; ++c) {
    const float diff = x - scale * static_cast<float>(kIq4Values[c]);
    if (diff * diff < best_err) {
      best_err = diff * diff;
      best = c;
    }
  }
  return best;
}

float Iq4Error(const float* x, float scale) {
  float err = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float diff = x[i] - scale * static_cast<float>(kIq4Values[NearestIq4Code(x[i], scale)]);
    err += diff * diff;
  }
  return err;
}

// A sub-block's IQ4 scale: its value of largest magnitude at either end of the grid
// (-127 or 113), and a few scales either side of those, by the squared error.
float FitIq4Scale(const float* x) {
  float extreme = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  if (extreme == 0.0f) return 0.0f;
  float best = extreme / -127.0f;
  float best_err = Iq4Error(x, best);
  for (float end : {-127.0f, 113.0f}) {
    for (float stretch : {0.85f, 0.9f, 0.95f, 1.0f, 1.05f}) {
      const float scale = extreme / end * stretch;
      const float err = Iq4Error(x, scale);
      if (err < best_err) {
        best_err = err;
        best = scale;
      }
    }
  }
  return best;
}

void PackIq4Nibbles(const float* x, const float* scales, int sub_blocks, uint8_t* qs) {
  for (int j = 0; j < sub_blocks; ++j) {
    for (int i = 0; i < 16; ++i) {
      const int lo = NearestIq4Code(x[32 * j + i], scales[j]);
      const int hi = NearestIq4Code(x[32 * j + i + 16], scales[j]);
      qs[16 * j + i] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
}

void QuantizeIq4Nl(const float* x, uint8_t* b) {
  const uint16_t d_bits = ToF16Saturated(FitIq4Scale(x));
  StoreU16(b, d_bits);
  const float d = F16ToF32(d_bits);
  PackIq4Nibbles(x, &d, 1, b + kIq4NlQs);
}

void QuantizeIq4Xs(const float* x, uint8_t* b) {
  float sub_scale[kSubBlocksK];
  float extreme = 0.0f;
  for (int j = 0; j < kSubBlocksK; ++j) {
    sub_scale[j] = FitIq4Scale(x + 32 * j);
    if (std::fabs(sub_scale[j]) > std::fabs(extreme)) extreme = sub_scale[j];
  }
  // As Q3_K's: the largest scale at the wider (-32) end of the 6-bit range, each
  // sub-block the better neighbour of its rounded scale.
  const uint16_t d_bits = ToF16NotSmaller(extreme / -32.0f);
  StoreU16(b, d_bits);
  const float d = F16ToF32(d_bits);
  float scales[kSubBlocksK];
  uint16_t high = 0;
  std::memset(b + kIq4XsScalesL, 0, 4);
  for (int j = 0; j < kSubBlocksK; ++j) {
    const int near = d != 0.0f ? RoundClamped(sub_scale[j] / d, -32, 31) : 0;
    int ls = near;
    float best_err = Iq4Error(x + 32 * j, d * static_cast<float>(near));
    for (int try_ls : {near - 1, near + 1}) {
      if (try_ls < -32 || try_ls > 31) continue;
      const float err = Iq4Error(x + 32 * j, d * static_cast<float>(try_ls));
      if (err < best_err) {
        best_err = err;
        ls = try_ls;
      }
    }
    scales[j] = d * static_cast<float>(ls);
    const int stored = ls + 32;
    b[kIq4XsScalesL + j / 2] |= static_cast<uint8_t>((stored & 15) << (4 * (j % 2)));
    high |= static_cast<uint16_t>((stored >> 4) << (2 * j));
  }
  StoreU16(b + kIq4XsScalesH, high);
  PackIq4Nibbles(x, scales, kSubBlocksK, b + kIq4XsQs);
}

}  // namespace

void Dequantize(DType type, const void* src, float* dst, int64_t n) {
  if (!IsQuantized(type)) {
    ConvertToF32(type, src, dst, static_cast<size_t>(n));
    return;
  }
  const int64_t block_elements = DTypeBlockElements(type);
  const int64_t block_bytes = static_cast<int64_t>(DTypeBlockBytes(type));
  assert(n % block_elements == 0);
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / block_elements; ++i) {
    const uint8_t* b = bytes + i * block_bytes;
    float* y = dst + i * block_elements;
    switch (type) {
      case DType::kQ8_0:
        DequantizeQ8_0(b, y);
        break;
      case DType::kQ4_0:
        DequantizeQ4_0(b, y);
        break;
      case DType::kQ4_K:
        DequantizeKQuant(b, b + kQ4KQs, nullptr, y);
        break;
      case DType::kQ5_K:
        DequantizeKQuant(b, b + kQ5KQs, b + kQ5KQh, y);
        break;
      case DType::kQ6_K:
        DequantizeQ6_K(b, y);
        break;
      case DType::kQ4_1:
        DequantizeWithOffset(b, b + kQ4_1Qs, nullptr, y);
        break;
      case DType::kQ5_0:
        DequantizeQ5_0(b, y);
        break;
      case DType::kQ5_1:
        DequantizeWithOffset(b, b + kQ5_1Qs, b + kQ5_1Qh, y);
        break;
      case DType::kQ2_K:
        DequantizeQ2_K(b, y);
        break;
      case DType::kQ3_K:
        DequantizeQ3_K(b, y);
        break;
      case DType::kIQ4_NL: {
        const float d = LoadF16(b);
        DequantizeIq4(&d, b + kIq4NlQs, 1, y);
        break;
      }
      case DType::kIQ4_XS: {
        // Read as ggml does: each sub-block's 6-bit scale from its nibble and its two bits.
        const float d = LoadF16(b);
        const uint16_t high = LoadU16(b + kIq4XsScalesH);
        float scales[kSubBlocksK];
        for (int j = 0; j < kSubBlocksK; ++j) {
          const int ls = ((b[kIq4XsScalesL + j / 2] >> (4 * (j % 2))) & 15) | ((high >> (2 * j)) & 3) << 4;
          scales[j] = d * static_cast<float>(ls - 32);
        }
        DequantizeIq4(scales, b + kIq4XsQs, kSubBlocksK, y);
        break;
      }
      default:
        break;
    }
  }
}

BlockCodes CodesOf(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return {32, false, true, 128};  // a file may hold -128
    case DType::kQ4_0:
      return {32, true, false, 15};
    case DType::kQ4_K:
      return {32, true, false, 15};
    case DType::kQ5_K:
      return {32, true, false, 31};
    case DType::kQ6_K:
      return {16, false, true, 32};
    case DType::kQ4_1:
      return {32, true, false, 15};
    case DType::kQ5_0:
    case DType::kQ5_1:
      return {32, true, false, 31};
    case DType::kQ2_K:
      return {16, true, false, 3};
    case DType::kQ3_K:
      return {16, false, true, 4};
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return {32, false, true, 127};  // the table's values, -127..113
    default:
      break;
  }
  assert(false && "CodesOf: not a quantized type");
  return {1, false, false, 0};
}

bool HasIntegerSubBlockScales(DType type) {
  return type == DType::kQ2_K || type == DType::kQ3_K || type == DType::kQ4_K || type == DType::kQ5_K ||
         type == DType::kQ6_K;
}

void DecodeSuperBlock(DType type, const void* block, uint8_t* q, int16_t* sc, int16_t* m, float* d, float* dmin) {
  assert(HasIntegerSubBlockScales(type));
  const auto* b = static_cast<const uint8_t*>(block);
  switch (type) {
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five_bit = type == DType::kQ5_K;
      *d = LoadF16(b);
      *dmin = LoadF16(b + kKDmin);
      for (int j = 0; j < kSubBlocksK; ++j) {
        int s, mm;
        UnpackScaleMin(b + kKScales, j, &s, &mm);
        sc[j] = static_cast<int16_t>(s);
        m[j] = static_cast<int16_t>(mm);
      }
      const uint8_t* qs = b + (five_bit ? kQ5KQs : kQ4KQs);
      for (int e = 0; e < kSuperBlock; ++e) {
        int code = (qs[Q4KNibbleByte(e)] >> Q4KNibbleShift(e)) & 15;
        if (five_bit) code |= ((b[kQ5KQh + e % 32] >> Q5KHighBit(e)) & 1) << 4;
        q[e] = static_cast<uint8_t>(code);
      }
      return;
    }
    case DType::kQ6_K: {
      *d = LoadF16(b + kQ6KD);
      *dmin = *d;
      const auto* scales = reinterpret_cast<const int8_t*>(b + kQ6KScales);
      for (int j = 0; j < kSubBlocksQ6K; ++j) {
        sc[j] = scales[j];
        m[j] = static_cast<int16_t>(32 * scales[j]);
      }
      for (int e = 0; e < kSuperBlock; ++e) {
        const int low = (b[Q6KLowByte(e)] >> Q6KLowShift(e)) & 15;
        const int high = (b[kQ6KQh + Q6KHighByte(e)] >> Q6KHighShift(e)) & 3;
        q[e] = static_cast<uint8_t>(low | high << 4);
      }
      return;
    }
    case DType::kQ3_K: {
      *d = LoadF16(b + kQ3KD);
      *dmin = *d;
      for (int j = 0; j < kSubBlocks16; ++j) {
        sc[j] = static_cast<int16_t>(Q3KScale(b + kQ3KScales, j));
        m[j] = static_cast<int16_t>(4 * sc[j]);
      }
      for (int e = 0; e < kSuperBlock; ++e) {
        const int low = (b[kQ3KQs + Q2KByte(e)] >> Q2KShift(e)) & 3;
        const int third = (b[e % 32] >> Q3KHighBit(e)) & 1;
        q[e] = static_cast<uint8_t>(low + (third ? 4 : 0));
      }
      return;
    }
    case DType::kQ2_K: {
      *d = LoadF16(b + kQ2KD);
      *dmin = LoadF16(b + kQ2KDmin);
      for (int j = 0; j < kSubBlocks16; ++j) {
        sc[j] = static_cast<int16_t>(b[j] & 15);
        m[j] = static_cast<int16_t>(b[j] >> 4);
      }
      for (int e = 0; e < kSuperBlock; ++e) q[e] = static_cast<uint8_t>((b[kQ2KQs + Q2KByte(e)] >> Q2KShift(e)) & 3);
      return;
    }
    default:
      break;
  }
}

namespace {

// DecodeBlock's cases, one per layout family; the header says what q, scale and min hold.

// Q4_1 and Q5_1 (x = d * q + m) and Q5_0 (x = d * (q - 16)).
void DecodeQ4_1OrQ5Block(DType type, const uint8_t* b, int8_t* q, float* scale, float* min) {
  const bool offset = type != DType::kQ5_0;
  const uint8_t* qs = b + (type == DType::kQ4_1 ? kQ4_1Qs : type == DType::kQ5_0 ? kQ5_0Qs : kQ5_1Qs);
  const uint32_t high = type == DType::kQ4_1 ? 0 : LoadU32(b + (type == DType::kQ5_0 ? kQ5_0Qh : kQ5_1Qh));
  for (int e = 0; e < 32; ++e) {
    q[e] = static_cast<int8_t>(LegacyNibble(qs, e) | static_cast<int>((high >> e) & 1) << 4);
  }
  const float d = LoadF16(b);
  scale[0] = d;
  // -m: scale * q - min is then d * q + m exactly. 16 * d: exact, as Q4_0's 8 * d.
  min[0] = offset ? -LoadF16(b + 2) : 16.0f * d;
}

void DecodeQ4KOrQ5KBlock(bool five_bit, const uint8_t* b, int8_t* q, float* scale, float* min) {
  const float d = LoadF16(b);
  const float dmin = LoadF16(b + kKDmin);
  for (int j = 0; j < kSubBlocksK; ++j) {
    int sc, m;
    UnpackScaleMin(b + kKScales, j, &sc, &m);
    scale[j] = d * static_cast<float>(sc);
    min[j] = dmin * static_cast<float>(m);
  }
  const uint8_t* qs = b + (five_bit ? kQ5KQs : kQ4KQs);
  for (int e = 0; e < kSuperBlock; ++e) {
    int code = (qs[Q4KNibbleByte(e)] >> Q4KNibbleShift(e)) & 15;
    if (five_bit) code |= ((b[kQ5KQh + e % 32] >> Q5KHighBit(e)) & 1) << 4;
    q[e] = static_cast<int8_t>(code);
  }
}

void DecodeQ6KBlock(const uint8_t* b, int8_t* q, float* scale, float* min) {
  const float d = LoadF16(b + kQ6KD);
  const auto* scales = reinterpret_cast<const int8_t*>(b + kQ6KScales);
  for (int j = 0; j < kSubBlocksQ6K; ++j) {
    scale[j] = d * static_cast<float>(scales[j]);
    min[j] = 0.0f;
  }
  for (int e = 0; e < kSuperBlock; ++e) {
    const int low = (b[Q6KLowByte(e)] >> Q6KLowShift(e)) & 15;
    const int high = (b[kQ6KQh + Q6KHighByte(e)] >> Q6KHighShift(e)) & 3;
    q[e] = static_cast<int8_t>((low | high << 4) - 32);
  }
}

void DecodeQ2KBlock(const uint8_t* b, int8_t* q, float* scale, float* min) {
  const float d = LoadF16(b + kQ2KD);
  const float dmin = LoadF16(b + kQ2KDmin);
  for (int j = 0; j < kSubBlocks16; ++j) {
    scale[j] = d * static_cast<float>(b[j] & 15);
    min[j] = dmin * static_cast<float>(b[j] >> 4);
  }
  for (int e = 0; e < kSuperBlock; ++e) q[e] = static_cast<int8_t>((b[kQ2KQs + Q2KByte(e)] >> Q2KShift(e)) & 3);
}

void DecodeQ3KBlock(const uint8_t* b, int8_t* q, float* scale, float* min) {
  const float d = LoadF16(b + kQ3KD);
  for (int j = 0; j < kSubBlocks16; ++j) {
    scale[j] = d * static_cast<float>(Q3KScale(b + kQ3KScales, j));
    min[j] = 0.0f;
  }
  for (int e = 0; e < kSuperBlock; ++e) {
    const int low = (b[kQ3KQs + Q2KByte(e)] >> Q2KShift(e)) & 3;
    const int third = (b[e % 32] >> Q3KHighBit(e)) & 1;
    q[e] = static_cast<int8_t>(low - (third ? 0 : 4));
  }
}

// IQ4_NL (one block of 32) and IQ4_XS (eight sub-blocks of 32, each with a 6-bit scale).
void DecodeIq4Block(bool xs, const uint8_t* b, int8_t* q, float* scale, float* min) {
  const int sub_blocks = xs ? kSubBlocksK : 1;
  const float d = LoadF16(b);
  const uint8_t* qs = b + (xs ? kIq4XsQs : kIq4NlQs);
  for (int j = 0; j < sub_blocks; ++j) {
    scale[j] = xs ? d * static_cast<float>(Iq4XsScale(b, j)) : d;
    min[j] = 0.0f;
    for (int e = 0; e < 32; ++e) q[32 * j + e] = kIq4Values[LegacyNibble(qs + 16 * j, e)];
  }
}

}  // namespace

void DecodeBlock(DType type, const void* block, int8_t* q, float* scale, float* min) {
  const auto* b = static_cast<const uint8_t*>(block);
  switch (type) {
    case DType::kQ8_0: {
      std::memcpy(q, b + kQ8_0Qs, 32);
      scale[0] = LoadF16(b);
      min[0] = 0.0f;
      return;
    }
    case DType::kQ4_0: {
      const float d = LoadF16(b);
      for (int e = 0; e < 32; ++e) {
        q[e] = static_cast<int8_t>((b[kQ4_0Qs + e % 16] >> (4 * (e / 16))) & 15);
      }
      scale[0] = d;
      min[0] = 8.0f * d;  // exact: a power-of-two multiple of an f16 value
      return;
    }
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return DecodeQ4_1OrQ5Block(type, b, q, scale, min);
    case DType::kQ4_K:
    case DType::kQ5_K:
      return DecodeQ4KOrQ5KBlock(type == DType::kQ5_K, b, q, scale, min);
    case DType::kQ6_K:
      return DecodeQ6KBlock(b, q, scale, min);
    case DType::kQ2_K:
      return DecodeQ2KBlock(b, q, scale, min);
    case DType::kQ3_K:
      return DecodeQ3KBlock(b, q, scale, min);
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return DecodeIq4Block(type == DType::kIQ4_XS, b, q, scale, min);
    default:
      break;
  }
  assert(false && "DecodeBlock: not a quantized type");
}

void Quantize(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = type == DType::kF16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
      }
      return;
    }
    default:
      break;
  }
  const int64_t block_elements = DTypeBlockElements(type);
  const int64_t block_bytes = static_cast<int64_t>(DTypeBlockBytes(type));
  assert(n % block_elements == 0);
  auto* bytes = static_cast<uint8_t*>(dst);
  float x[kSuperBlock];
  for (int64_t i = 0; i < n / block_elements; ++i) {
    for (int64_t e = 0; e < block_elements; ++e) x[e] = SanitizedInput(src[i * block_elements + e]);
    uint8_t* b = bytes + i * block_bytes;
    switch (type) {
      case DType::kQ8_0:
        QuantizeQ8_0(x, b);
        break;
      case DType::kQ4_0:
        QuantizeQ4_0(x, b);
        break;
      case DType::kQ4_K:
        QuantizeQ4_K(x, b);
        break;
      case DType::kQ5_K:
        QuantizeQ5_K(x, b);
        break;
      case DType::kQ6_K:
        QuantizeQ6_K(x, b);
        break;
      case DType::kQ4_1:
        QuantizeWithOffset(x, 15, b, b + kQ4_1Qs, nullptr);
        break;
      case DType::kQ5_0:
        QuantizeQ5_0(x, b);
        break;
      case DType::kQ5_1:
        QuantizeWithOffset(x, 31, b, b + kQ5_1Qs, b + kQ5_1Qh);
        break;
      case DType::kQ2_K:
        QuantizeQ2_K(x, b);
        break;
      case DType::kQ3_K:
        QuantizeQ3_K(x, b);
        break;
      case DType::kIQ4_NL:
        QuantizeIq4Nl(x, b);
        break;
      case DType::kIQ4_XS:
        QuantizeIq4Xs(x, b);
        break;
      default:
        break;
    }
  }
}

}  // namespace crossreg::quant
