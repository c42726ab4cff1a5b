// AVX-512 VNNI kQ8 kernel (engine/cpu/linear_kernels.h): vpdpbusd multiplies 16 outputs'
// 4 consecutive quants with 4 broadcast activation bytes and adds the four products to
// each output's int32 sum in one instruction, where the AVX2 kernel needs vpmaddubsw,
// vpmaddwd and an add. The panel layout is the AVX2 kernel's (256-bit quarters of 8
// outputs): a byte panel's step holds quarters 0-1 and 2-3 as two 64-byte lines, one load
// each; a nibble panel's step joins them (a load and an insert each, shared by every row
// of the tile). So a row costs one broadcast and two vpdpbusd per step: at full width, a CPU with two 512-bit VNNI pipes spends its cycles
// on the products. The tile's f32 sums stay in registers across the groups. Tiles take up
// to kQuantTileRowsVnni (6) rows: 12 f32 sums and 12 int32 ones in 24 of the 32 registers
// spread the step's joins and offsets over more rows than the AVX2 kernel's 4 (one core,
// one L1-resident panel: about an eighth more G ops/s at 6 rows than at 4; in the linear
// calls of the ~110M model, 2-14% more at 16 and 32 rows and at 512 but for the Q8_0
// 32000-output call, 6% less; `crossreg-bench-decode --gemm_types q8_0,q4_k`).
//
// vpdpbusd takes one operand unsigned and one signed; the activations are the signed one.
// Formats with mins store unsigned quants: they go in as they are. Signed quants (Q8_0,
// Q6_K) go in offset to unsigned (w + 128, a flip of the top bit, once per step for all
// rows), and each sum starts at -128 times the row's sum of the group's activation codes
// (QuantizedRows::offset32 / offset16, exact), so it ends exact. Every sum is exact in
// int32 and the float steps are the scalar kernel's, so the results agree bit for bit.
// 4-bit codes (Q4_0, Q4_K) come two a byte (nibble panels, packed_weights.h): a step pair
// is joined once and split into its low and high nibbles with a shift and two masks, for
// all rows; batch-1 decoding streams half the bytes of the byte layout. Q5_K's and Q6_K's
// high bits come from a plane per quarter, a shift and a vpternlogd per joined step.
// Compiled with AVX-512 F/BW/VL/DQ and VNNI; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/quant_panel_order.h"

namespace crossreg::cpu::internal {
namespace {

inline __m512i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// Quarters q and q + 1 of a step (8 outputs x 4 quants each), as 16 outputs x 4 quants;
// a quarter spans quarter_bytes of the group.
inline __m512i LoadQuarterPair(const unsigned char* step, int quarter_bytes, int q) {
  const auto* lo = reinterpret_cast<const __m256i*>(step + q * quarter_bytes);
  const auto* hi = reinterpret_cast<const __m256i*>(step + (q + 1) * quarter_bytes);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(lo)), _mm256_loadu_si256(hi), 1);
}

// Step `step` of a group's codes as quarters 0-1 (w01) and 2-3 (w23), 16 outputs x 4 codes
// each. Nibble panels: called for every step in order, fully unrolled so the parity is
// known, an even step reads its pair's bytes and keeps the high nibbles in odd01/odd23
// for the odd step after it. Byte panels: a step holds its 4 quarters in order, so
// quarters 0-1 are its first 64 bytes.
template <bool kNib, int kQuarterBytes>
inline void LoadStepCodes(const unsigned char* group, int step, __m512i* w01, __m512i* w23, __m512i* odd01,
                          __m512i* odd23) {
  if constexpr (kNib) {
    if (step % 2 == 0) {
      const __m512i low4 = _mm512_set1_epi8(15);
      const unsigned char* at = group + (step / 2) * 32;
      const __m512i p01 = LoadQuarterPair(at, kQuarterBytes, 0);
      const __m512i p23 = LoadQuarterPair(at, kQuarterBytes, 2);
      *w01 = _mm512_and_si512(p01, low4);
      *w23 = _mm512_and_si512(p23, low4);
      *odd01 = _mm512_and_si512(_mm512_srli_epi16(p01, 4), low4);
      *odd23 = _mm512_and_si512(_mm512_srli_epi16(p23, 4), low4);
    } else {
      *w01 = *odd01;
      *w23 = *odd23;
    }
  } else {
    const unsigned char* at = group + step * 128;
    *w01 = _mm512_loadu_si512(at);
    *w23 = _mm512_loadu_si512(at + 64);
  }
}

// 16 of a group's scales (or mins) from index i on, f16 or f32 (QuantGroupLayout::f16_scales).
inline __m512 LoadScales16(const unsigned char* scales, int i, bool f16) {
  return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 2 * i)))
             : _mm512_loadu_ps(scales + 4 * i);
}

// One tile of R rows over groups [g0, g1) of one panel: out (R x 32 floats) gets the
// tile's sums, which start from out's when carry_in (quant_panel_order.h). Every
// loop over rows or halves is unrolled so that the sums live in registers (an array
// indexed at run time would be kept in memory).
template <int R, int S, bool kSigned, bool kMin, bool kNib>
void QuantTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, int64_t g0, int64_t g1,
               bool carry_in, QuantPrefetch prefetch, float (*out)[kPanelWidth]) {
  const QuantizedRows& qx = *a.qx;
  const int64_t in = qx.in;
  const int64_t group_bytes = a.w->quant().group_bytes();
  const bool f16 = a.w->quant().f16_scales;
  static_assert(!kNib || !kSigned, "nibble panels hold unsigned codes");
  constexpr int kQuarterBytes = (kNib ? S / 8 : S / 4) * 32;
  const __m512i top_bit = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = carry_in ? _mm512_loadu_ps(out[r]) : _mm512_setzero_ps();
    acc[r][1] = carry_in ? _mm512_loadu_ps(out[r] + 16) : _mm512_setzero_ps();
  }
  for (int64_t g = g0; g < g1; ++g) {
    const unsigned char* group = panel + (g - g0) * group_bytes;
    // One row's tile spreads the group's lines over the first half of its S / 4 steps, as
    // the AVX2 kernel does; a tile of several rows takes them at once.
    PrefetchCursor lines(prefetch, g - g0, R == 1 ? S / 8 : 0);
    const int8_t* xq[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xq[r] = qx.q + (first_row + r) * in + g * S;
    // Signed formats start each sum at -128 times the row's code sum, which the w + 128
    // they are fed adds back, so the sum ends exact with no correction.
    __m512i isum[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if constexpr (kSigned) {
        const int64_t row = first_row + r;
        const int32_t start = S == 16 ? qx.offset16[row * (in / 16) + g] : qx.offset32[row * (in / 32) + g];
        isum[r][0] = isum[r][1] = _mm512_set1_epi32(start);
      } else {
        isum[r][0] = isum[r][1] = _mm512_setzero_si512();
      }
    }
    [[maybe_unused]] __m512i odd01 = _mm512_setzero_si512(), odd23 = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int step = 0; step < S / 4; ++step) {
      if constexpr (R == 1) lines.Pass();
      __m512i w01, w23;
      LoadStepCodes<kNib, kQuarterBytes>(group, step, &w01, &w23, &odd01, &odd23);
      if constexpr (kSigned) {
        w01 = _mm512_xor_si512(w01, top_bit);  // w + 128, as unsigned bytes
        w23 = _mm512_xor_si512(w23, top_bit);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i x = Broadcast4(xq[r] + step * 4);
        isum[r][0] = _mm512_dpbusd_epi32(isum[r][0], w01, x);
        isum[r][1] = _mm512_dpbusd_epi32(isum[r][1], w23, x);
      }
    }
    const unsigned char* scales = group + 4 * kQuarterBytes;
    const __m512 ws[2] = {LoadScales16(scales, 0, f16), LoadScales16(scales, 16, f16)};
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
      const float xs = qx.scale[row * (in / 32) + (g * S) / 32];
      const __m512 wx = _mm512_set1_ps(xs);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        acc[r][h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][h]), _mm512_mul_ps(ws[h], wx), acc[r][h]);
      }
      if constexpr (kMin) {
        const float* s16 = qx.sum16 + row * (in / 16) + (g * S) / 16;
        const __m512 xsum = _mm512_set1_ps((S == 16 ? s16[0] : s16[0] + s16[1]) * xs);  // code sum x scale
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          acc[r][h] = _mm512_fnmadd_ps(xsum, LoadScales16(scales, kPanelWidth + 16 * h, f16), acc[r][h]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(out[r], acc[r][0]);
    _mm512_storeu_ps(out[r] + 16, acc[r][1]);
  }
}

// Step `step`'s high code bits of 16 outputs (nibble panels with high bits,
// packed_weights.h) or-ed into its low nibbles w: the plane's kHigh bits of the step moved
// to bits 4.. of each byte (16-bit shifts: bits carried across a byte land outside the
// mask), then w | (moved & mask) in one vpternlogd.
template <int kHigh>
inline __m512i WithHighBits(__m512i w, __m512i plane, int step) {
  const int shift = 4 - kHigh * step;  // a constant once the step loop is unrolled
  const __m512i moved = shift > 0 ? _mm512_slli_epi16(plane, shift) : shift < 0 ? _mm512_srli_epi16(plane, -shift) : plane;
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(((1 << kHigh) - 1) << 4));
  return _mm512_ternarylogic_epi32(w, moved, mask, 0xF8);  // a | (b & c)
}

// One tile of R rows over super-blocks [g0, g1) of a panel of integer sub-block scales
// (packed_weights.h): each sub-block's vpdpbusd sums, exact in int32, times the
// sub-block's scale (vpmulld; a scale pair's low half, sign-extended) into one int32 sum
// per super-block; the mins' sum is a vpdpwssd per pair of sub-blocks (Q6_K's sums
// start at its offset instead); then the float steps, once per super-block. The f32 sums wait in `out` between super-blocks (the registers
// hold the tile's sub-block and super-block sums).
template <int R, int S, bool kNib, int kMinShift, int kHigh>
void SuperBlockTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, int64_t g0, int64_t g1,
                    bool carry_in, QuantPrefetch prefetch, float (*out)[kPanelWidth]) {
  const QuantizedRows& qx = *a.qx;
  const int64_t in = qx.in;
  constexpr int kSubs = 256 / S;
  static_assert(kHigh == 0 || kNib, "high bits: nibble panels only");
  // Nibble panels: a quarter's step pairs, then its high plane (kHigh > 0).
  constexpr int kQuarterBytes = kNib ? S / 8 * 32 + (kHigh > 0 ? 32 : 0) : S / 4 * 32;
  constexpr int64_t kCodeBytes = 4 * kQuarterBytes;
  // QuantGroupLayout's offsets, known at compile time here.
  constexpr int64_t kScalesAt = kSubs * kCodeBytes, kMinsAt = kScalesAt + kSubs * kPanelWidth;
  constexpr int64_t kDAt = kMinsAt + (kMinShift > 0 ? 0 : kSubs * kPanelWidth);
  // Compile-time: the panel may be a staged byte copy of a nibble one (quant_panel_order.h).
  constexpr int64_t group_bytes = kDAt + 256;
  if (!carry_in) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(out[r], _mm512_setzero_ps());
      _mm512_storeu_ps(out[r] + 16, _mm512_setzero_ps());
    }
  }
  for (int64_t g = g0; g < g1; ++g) {
    const unsigned char* group = panel + (g - g0) * group_bytes;
    PrefetchCursor lines(prefetch, g - g0, 64);  // over all 64 steps, as the AVX2 kernel
    const int8_t* xq[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xq[r] = qx.q256 + (first_row + r) * in + g * 256;
    __m512i isum[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r][0] = isum[r][1] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int sb = 0; sb < kSubs; ++sb) {
      const unsigned char* codes = group + sb * kCodeBytes;
      __m512i dot[R][2];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (kMinShift > 0) {
          // Q6_K, Q3_K: the sums start at -2^shift times the row's code sum, so they end
          // at ((q - 2^shift) . x) and, scaled, at isum - msum: no mins pass.
          const int64_t row = first_row + r;
          dot[r][0] = dot[r][1] = _mm512_set1_epi32(-(1 << kMinShift) * qx.isum16[row * (in / 16) + g * kSubs + sb]);
        } else {
          dot[r][0] = dot[r][1] = _mm512_setzero_si512();
        }
      }
      [[maybe_unused]] __m512i odd01 = _mm512_setzero_si512(), odd23 = _mm512_setzero_si512();
      [[maybe_unused]] __m512i high01 = _mm512_setzero_si512(), high23 = _mm512_setzero_si512();
      if constexpr (kHigh > 0) {
        high01 = LoadQuarterPair(codes + S / 8 * 32, kQuarterBytes, 0);
        high23 = LoadQuarterPair(codes + S / 8 * 32, kQuarterBytes, 2);
      }
#pragma GCC unroll 8
      for (int step = 0; step < S / 4; ++step) {
        lines.Pass();
        __m512i w01, w23;
        LoadStepCodes<kNib, kQuarterBytes>(codes, step, &w01, &w23, &odd01, &odd23);
        if constexpr (kHigh > 0) {
          w01 = WithHighBits<kHigh>(w01, high01, step);
          w23 = WithHighBits<kHigh>(w23, high23, step);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i x = Broadcast4(xq[r] + sb * S + step * 4);
          dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], w01, x);
          dot[r][1] = _mm512_dpbusd_epi32(dot[r][1], w23, x);
        }
      }
      // The scales of outputs 0-15 and 16-31, a signed byte each, to int32 lanes.
      const unsigned char* sc_at = group + kScalesAt + sb * kPanelWidth;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc_at + 16 * h)));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) isum[r][h] = _mm512_add_epi32(isum[r][h], _mm512_mullo_epi32(dot[r][h], sc));
      }
    }
    const auto* d = reinterpret_cast<const float*>(group + kDAt);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
      const __m512 wx = _mm512_set1_ps(qx.scale256[row * (in / 256) + g]);
      if constexpr (kMinShift > 0) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          __m512 v = _mm512_loadu_ps(out[r] + 16 * h);
          v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][h]), _mm512_mul_ps(_mm512_loadu_ps(d + 16 * h), wx), v);
          _mm512_storeu_ps(out[r] + 16 * h, v);
        }
        continue;
      }
      const int16_t* xsum = (S == 16 ? qx.isum16 + row * (in / 16) : qx.isum32 + row * (in / 32)) + g * kSubs;
      __m512i msum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
      for (int i = 0; i < kSubs / 2; ++i) {
        int32_t pair;
        std::memcpy(&pair, xsum + 2 * i, sizeof pair);
        const __m512i xp = _mm512_set1_epi32(pair);
        // Each output's mins of sub-blocks 2i and 2i + 1, bytes widened to the int16 pairs.
        const auto* m_at = reinterpret_cast<const __m256i*>(group + kMinsAt + i * 2 * kPanelWidth);
        msum[0] = _mm512_dpwssd_epi32(msum[0], _mm512_cvtepu8_epi16(_mm256_loadu_si256(m_at)), xp);
        msum[1] = _mm512_dpwssd_epi32(msum[1], _mm512_cvtepu8_epi16(_mm256_loadu_si256(m_at + 1)), xp);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512 v = _mm512_loadu_ps(out[r] + 16 * h);
        v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][h]), _mm512_mul_ps(_mm512_loadu_ps(d + 16 * h), wx), v);
        v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[h]), _mm512_mul_ps(_mm512_loadu_ps(d + kPanelWidth + 16 * h), wx),
                             v);
        _mm512_storeu_ps(out[r] + 16 * h, v);
      }
    }
  }
}

// RunQuantPanels' run_tile over these panels: the tile's rows (at most 6) as a template argument.
template <int S, bool kNib, int kMinShift, int kHigh>
auto SuperBlockTiles(const PanelArgs& a) {
  return [&a](const unsigned char* panel, const RowTile& tile, int64_t g0, int64_t g1, bool carry_in,
              QuantPrefetch prefetch, float (*out)[kPanelWidth]) {
    const int64_t row = tile.first_row;
    WithTileRows<6>(tile.rows, [&](auto rows) {
      SuperBlockTile<decltype(rows)::value, S, kNib, kMinShift, kHigh>(a, panel, row, g0, g1, carry_in, prefetch, out);
    });
  };
}

template <int S, bool kNib, int kMinShift = 0, int kHigh = 0>
void SuperBlockPanels(const PanelArgs& a, int64_t begin, int64_t end) {
  // Unpacked once per panel or block for all the tiles (quant_panel_order.h) where the
  // tiles are many: the unpacking here is 512 bits wide and a tile up to 6 rows, so at
  // 3 tiles (16 rows) the stage's stores and reloads cost more than they save (Q4_K
  // 10-14% slower, Q6_K 4-7%); at 6 tiles Q6_K gains 7% and at 512 rows 15-19%, Q4_K 5%
  // (the ~110M model's linear calls, `crossreg-bench-decode --gemm_types q4_k,q6_k`).
  if (kNib && a.num_tiles >= 6) {
    return RunStagedQuantPanels(a, begin, end, SuperBlockTiles<S, false, kMinShift, 0>(a));
  }
  RunQuantPanels(a, begin, end, SuperBlockTiles<S, kNib, kMinShift, kHigh>(a));
}

template <int S, bool kSigned, bool kMin, bool kNib = false>
void Panels(const PanelArgs& a, int64_t begin, int64_t end) {
  RunQuantPanels(a, begin, end,
                 [&a](const unsigned char* panel, const RowTile& tile, int64_t g0, int64_t g1, bool carry_in,
                      QuantPrefetch prefetch, float (*out)[kPanelWidth]) {
                   const int64_t row = tile.first_row;
                   WithTileRows<6>(tile.rows, [&](auto rows) {
                     QuantTile<decltype(rows)::value, S, kSigned, kMin, kNib>(a, panel, row, g0, g1, carry_in, prefetch, out);
                   });
                 });
}

}  // namespace

void QuantPanelsAvx512Vnni(const PanelArgs& a, int64_t begin, int64_t end) {
  const QuantGroupLayout& l = a.w->quant();
  // The formats' layouts (engine/cpu/packed_weights.cc LayoutFor); int32 sums need no
  // int16 runs. Any other layout falls back to the portable kernel, which reads every one.
  if (l.super_block == 256) {
    // Q4_K, Q2_K, Q5_K (a high bit), Q6_K (two), Q3_K: all nibble panels.
    if (!l.nibbles) return QuantPanelsScalar(a, begin, end);
    if (l.sub_block == 32 && l.min_shift == 0 && l.high_bits == 0) return SuperBlockPanels<32, true>(a, begin, end);
    if (l.sub_block == 32 && l.min_shift == 0 && l.high_bits == 1) return SuperBlockPanels<32, true, 0, 1>(a, begin, end);
    if (l.sub_block == 16 && l.min_shift == 0 && l.high_bits == 0) return SuperBlockPanels<16, true>(a, begin, end);
    if (l.sub_block == 16 && l.min_shift == 2 && l.high_bits == 0) return SuperBlockPanels<16, true, 2>(a, begin, end);
    if (l.sub_block == 16 && l.min_shift == 5 && l.high_bits == 2) return SuperBlockPanels<16, true, 5, 2>(a, begin, end);
    return QuantPanelsScalar(a, begin, end);
  }
  if (l.nibbles) {
    if (l.sub_block == 32 && !l.signed_quants && l.has_min) return Panels<32, false, true, true>(a, begin, end);
    if (l.sub_block == 16 && !l.signed_quants && l.has_min) return Panels<16, false, true, true>(a, begin, end);
    return QuantPanelsScalar(a, begin, end);
  }
  if (l.sub_block == 32 && l.signed_quants && !l.has_min) return Panels<32, true, false>(a, begin, end);
  if (l.sub_block == 32 && !l.signed_quants && l.has_min) return Panels<32, false, true>(a, begin, end);
  if (l.sub_block == 16 && l.signed_quants && !l.has_min) return Panels<16, true, false>(a, begin, end);
  QuantPanelsScalar(a, begin, end);
}

}  // namespace crossreg::cpu::internal
