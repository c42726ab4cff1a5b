// AVX2 kQ8 kernel and row quantizer (engine/cpu/linear_kernels.h): vpmaddubsw multiplies
// 8 outputs' 4 consecutive quants with 4 broadcast activation bytes into int16 pairs,
// vpmaddwd widens them to int32 sums. Unsigned quants (formats with mins) go straight
// in; signed ones (Q8_0, Q6_K) as |w| against x carrying w's sign. Where the format's
// quants are small, several steps add in int16 before widening (QuantGroupLayout::
// int16_steps). Integer sums are exact, and the float steps are the scalar kernel's, so
// the results agree bit for bit. 4-bit codes may come two a byte (nibble panels,
// packed_weights.h): one shift and two masks per pair of steps, shared by the tile's rows;
// 5- and 6-bit codes (Q5_K, Q6_K) add their high bits from a plane, a shift, a mask and an
// or per step. Calls of several tiles unpack a panel once for all of them
// (quant_panel_order.h RunStagedQuantPanels), and the super-block formats' tiles then run
// two quarters at a time (SuperBlockPairTile).
// Compiled with -mavx2 -mfma; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/quant_panel_order.h"

namespace crossreg::cpu::internal {
namespace {

// A byte panel's step: 4 quarters of 8 outputs x 4 codes (packed_weights.h).
constexpr int kByteStepBytes = 128;

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Steps 2t and 2t + 1 of a nibble panel's quarter (packed_weights.h): one load, the low
// nibbles, the high ones.
inline void LoadNibblePair(const unsigned char* quants, int t, __m256i* even, __m256i* odd) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + t * 32));
  *even = _mm256_and_si256(packed, low4);
  *odd = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
}

// 8 of a group's scales (or mins) from index i on, f16 or f32 (QuantGroupLayout::f16_scales).
template <bool kF16>
inline __m256 LoadScales8(const unsigned char* scales, int i) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 2 * i)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(scales + 4 * i));
  }
}

// One tile of R rows over groups [g0, g1) of one panel: acc (R x 32 floats) accumulates
// group after group, from zero unless carry_in (quant_panel_order.h).
template <int R, int S, bool kSigned, bool kMin, int kRun, bool kNib, bool kF16>
void QuantTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, int64_t g0, int64_t g1,
               bool carry_in, QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
  const QuantizedRows& qx = *a.qx;
  const int64_t in = qx.in;
  const int64_t group_bytes = a.w->quant().group_bytes();
  const __m256i ones = _mm256_set1_epi16(1);
  if (!carry_in) {
    for (int r = 0; r < R; ++r)
      for (int o = 0; o < kPanelWidth; o += 8) _mm256_storeu_ps(acc[r] + o, _mm256_setzero_ps());
  }
  for (int64_t g = g0; g < g1; ++g) {
    const unsigned char* group = panel + (g - g0) * group_bytes;
    // One row's tile spreads the group's lines over the first half of its S steps (4
    // quarters of S / 4); spread over all of them, the ~1.1B Q8_0 model decoded about 5%
    // slower. A tile of several rows takes them at once.
    PrefetchCursor lines(prefetch, g - g0, R == 1 ? S / 2 : 0);
    const unsigned char* scales = group + (kNib ? 16 : 32) * S;
    // The rows' scales and sums stay in memory, broadcast where used: held in registers
    // across the quarters they spill the accumulators.
    float xs[R];
    float xsum[R];  // the row's sum of the group's codes times its scale
    const int8_t* xq[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
      xs[r] = qx.scale[row * (in / 32) + (g * S) / 32];
      xq[r] = qx.q + row * in + g * S;
      if constexpr (kMin) {
        const float* s16 = qx.sum16 + row * (in / 16) + (g * S) / 16;
        xsum[r] = (S == 16 ? s16[0] : s16[0] + s16[1]) * xs[r];
      }
    }
    // Not unrolled: unrolled, the compiler keeps every step's broadcast activations live
    // across the four quarters and spills them (R x S/4 registers).
#pragma GCC unroll 1
    for (int quarter = 0; quarter < 4; ++quarter) {
      // Nibble panels hold a quarter's step pairs together; byte panels a step's quarters
      // (packed_weights.h), so a byte step of this quarter is kByteStepBytes on.
      const unsigned char* quants = group + (kNib ? quarter * (S / 8) * 32 : quarter * 32);
      // The activation pointers made opaque per quarter: otherwise the compiler hoists
      // every step's broadcast out of this loop and spills them (R x S/4 registers),
      // turning one broadcast load into a spill store and a reload.
      const int8_t* xr[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = xq[r];
        asm("" : "+r"(xr[r]));
      }
      __m256i isum[R];
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
      for (int step0 = 0; step0 < S / 4; step0 += kRun) {
        __m256i run[R];
        for (int r = 0; r < R; ++r) run[r] = _mm256_setzero_si256();
        [[maybe_unused]] __m256i odd_codes = _mm256_setzero_si256();
        static_assert(!kNib || (kRun % 2 == 0 && !kSigned), "nibble panels: unsigned codes, runs of whole step pairs");
        for (int t = 0; t < kRun; ++t) {
          const int step = step0 + t;
          if constexpr (R == 1) lines.Pass();
          // Byte panels: the step's codes; nibble panels read theirs below.
          const __m256i w = kNib ? _mm256_setzero_si256()
                                 : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + step * kByteStepBytes));
          if constexpr (kSigned) {
            const __m256i aw = _mm256_abs_epi8(w);
            for (int r = 0; r < R; ++r) {
              const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(Broadcast4(xr[r] + step * 4), w));
              run[r] = kRun == 1 ? p : _mm256_add_epi16(run[r], p);
              if constexpr (kRun > 1) asm("" : "+x"(run[r]));
            }
          } else {
            __m256i wu = w;
            if constexpr (kNib) {
              // kRun is even and runs start at even steps: t's parity is the step's, and
              // an even step loads its odd neighbour's codes too.
              if (t % 2 == 0) {
                LoadNibblePair(quants, step / 2, &wu, &odd_codes);
              } else {
                wu = odd_codes;
              }
            }
            for (int r = 0; r < R; ++r) {
              const __m256i p = _mm256_maddubs_epi16(wu, Broadcast4(xr[r] + step * 4));
              run[r] = kRun == 1 ? p : _mm256_add_epi16(run[r], p);
              asm("" : "+x"(run[r]));  // as isum below: no re-association, no spills
            }
          }
        }
        for (int r = 0; r < R; ++r) {
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(run[r], ones));
          // Pinned per step: left free, GCC re-associates the integer adds into trees
          // whose partial sums spill.
          asm("" : "+x"(isum[r]));
        }
      }
      const __m256 ws = LoadScales8<kF16>(scales, 8 * quarter);
      for (int r = 0; r < R; ++r) {
        __m256 v = _mm256_loadu_ps(acc[r] + 8 * quarter);
        const __m256 xsr = _mm256_broadcast_ss(&xs[r]);
        v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(ws, xsr), v);
        if constexpr (kMin) {
          const __m256 wm = LoadScales8<kF16>(scales, kPanelWidth + 8 * quarter);
          v = _mm256_fnmadd_ps(_mm256_broadcast_ss(&xsum[r]), wm, v);
        }
        _mm256_storeu_ps(acc[r] + 8 * quarter, v);
      }
    }
  }
}

// A step's high code bits (nibble panels with high bits, packed_weights.h): step s's
// kHigh bits of each byte of the plane, moved to bits 4.. of that byte. The shifts are
// 16-bit; bits they carry across a byte boundary land outside the mask.
template <int kHigh>
inline __m256i HighBits(__m256i plane, int step) {
  const int shift = 4 - kHigh * step;  // a constant once the step loop is unrolled
  const __m256i moved = shift > 0 ? _mm256_slli_epi16(plane, shift) : shift < 0 ? _mm256_srli_epi16(plane, -shift) : plane;
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(((1 << kHigh) - 1) << 4)));
}

// A quarter's 8 integer scales (bytes) as the int16 pairs (sc, sc) of vpmaddwd: the 8 bytes
// in both 128-bit lanes, each shuffled into both halves of its output's int32 lane. Signed
// scales (Q6_K, Q3_K) go to the high bytes and shift down arithmetically.
template <bool kSignedScales>
inline __m256i ScalePairs(const unsigned char* p) {
  int64_t eight;
  std::memcpy(&eight, p, sizeof eight);
  const __m256i bytes = _mm256_set1_epi64x(eight);
  constexpr char z = -128;  // vpshufb: a zero byte
  if constexpr (kSignedScales) {
    const __m256i high = _mm256_setr_epi8(z, 0, z, 0, z, 1, z, 1, z, 2, z, 2, z, 3, z, 3,  //
                                          z, 4, z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes, high), 8);
  } else {
    const __m256i low = _mm256_setr_epi8(0, z, 0, z, 1, z, 1, z, 2, z, 2, z, 3, z, 3, z,  //
                                         4, z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7, z);
    return _mm256_shuffle_epi8(bytes, low);
  }
}

// A tile's rows' activations for super-block g (QuantizedRows' per-256 arrays): each
// row's scale, its codes and its code sums per sub-block of S.
template <int R, int S>
struct SuperBlockRows {
  float scale[R];
  const int8_t* codes[R];
  const int16_t* sums[R];
  SuperBlockRows(const QuantizedRows& qx, int64_t first_row, int64_t g) {
    const int64_t in = qx.in;
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
      scale[r] = qx.scale256[row * (in / 256) + g];
      codes[r] = qx.q256 + row * in + g * 256;
      sums[r] = (S == 16 ? qx.isum16 + row * (in / 16) : qx.isum32 + row * (in / 32)) + g * (256 / S);
    }
  }
};

// The end of a quarter of a super-block tile (SuperBlockTile, SuperBlockPairTile): the
// rows' sums of the mins (a vpmaddwd per pair of sub-blocks, from the rows' code sums per
// sub-block), then one float step per row into the quarter's 8 outputs of acc.
template <int R, int S, int kMinShift>
__attribute__((always_inline)) inline void SuperBlockQuarterEnd(const unsigned char* sc_bytes,
                                                                const unsigned char* m_bytes, const float* d,
                                                                const int16_t* const* xsum, const float* xs,
                                                                int quarter, const __m256i* isum,
                                                                float (*acc)[kPanelWidth]) {
  constexpr int kSubs = 256 / S;
  __m256i msum[R];
  for (int r = 0; r < R; ++r) msum[r] = _mm256_setzero_si256();
  for (int i = 0; i < kSubs / 2; ++i) {
    __m256i m;
    if constexpr (kMinShift > 0) {
      // (sc[2i], sc[2i + 1]) per output from the two sub-blocks' scales, interleaved
      // and sign-extended; the sum is shifted below.
      const __m128i even = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc_bytes + 2 * i * kPanelWidth + quarter * 8));
      const __m128i odd =
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc_bytes + (2 * i + 1) * kPanelWidth + quarter * 8));
      m = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(even, odd));
    } else {
      // The quarter's 8 outputs' (m[2i], m[2i + 1]) bytes, widened to int16 pairs.
      m = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(m_bytes + i * 2 * kPanelWidth + quarter * 16)));
    }
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, xsum[r] + 2 * i, sizeof pair);
      msum[r] = _mm256_add_epi32(msum[r], _mm256_madd_epi16(m, _mm256_set1_epi32(pair)));
    }
  }
  if constexpr (kMinShift > 0) {
    for (int r = 0; r < R; ++r) msum[r] = _mm256_slli_epi32(msum[r], kMinShift);
  }
  const __m256 dq = _mm256_loadu_ps(d + 8 * quarter);
  const __m256 dminq = _mm256_loadu_ps(d + kPanelWidth + 8 * quarter);
  for (int r = 0; r < R; ++r) {
    __m256 v = _mm256_loadu_ps(acc[r] + 8 * quarter);
    const __m256 xsr = _mm256_broadcast_ss(&xs[r]);
    if constexpr (kMinShift > 0) {
      v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[r], msum[r])), _mm256_mul_ps(dq, xsr), v);
    } else {
      v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dq, xsr), v);
      v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[r]), _mm256_mul_ps(dminq, xsr), v);
    }
    _mm256_storeu_ps(acc[r] + 8 * quarter, v);
  }
}

// One tile of R rows over super-blocks [g0, g1) of a panel of integer sub-block scales
// (packed_weights.h): per quarter, each sub-block's int16 runs go through vpmaddwd with
// the sub-block's scale pairs (ScalePairs) instead of ones, so they widen and scale in one
// instruction into one int32 sum for the super-block; the mins' sum is a vpmaddwd per
// pair of sub-blocks; then one float step per super-block where the per-sub-block
// layout takes one per sub-block. Calls of one tile run it over the nibble panel itself;
// calls of several, SuperBlockPairTile over a staged byte copy, so this tile reads nibble
// panels only.
template <int R, int S, int kRun, int kMinShift, int kHigh>
void SuperBlockTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, int64_t g0, int64_t g1,
                    bool carry_in, QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
  const QuantizedRows& qx = *a.qx;
  constexpr int kSubs = 256 / S;
  // A quarter's step pairs, then its high plane (kHigh > 0).
  constexpr int64_t kQuarterBytes = 4 * S + (kHigh > 0 ? 32 : 0);
  constexpr int64_t kCodeBytes = 4 * kQuarterBytes;
  // QuantGroupLayout's offsets, known at compile time here.
  constexpr int64_t kScalesAt = kSubs * kCodeBytes, kMinsAt = kScalesAt + kSubs * kPanelWidth;
  constexpr int64_t kDAt = kMinsAt + (kMinShift > 0 ? 0 : kSubs * kPanelWidth);
  constexpr int64_t group_bytes = kDAt + 256;
  static_assert(kRun % 2 == 0, "nibble panels: runs of whole step pairs");
  if (!carry_in) {
    for (int r = 0; r < R; ++r)
      for (int o = 0; o < kPanelWidth; o += 8) _mm256_storeu_ps(acc[r] + o, _mm256_setzero_ps());
  }
  for (int64_t g = g0; g < g1; ++g) {
    const unsigned char* group = panel + (g - g0) * group_bytes;
    // The lines spread over all 256 steps, a pass per step pair: over the first half, the
    // ~1.1B Q4_K_M model decoded about 8% slower.
    PrefetchCursor lines(prefetch, g - g0, 128);
    const unsigned char* sc_bytes = group + kScalesAt;
    const unsigned char* m_bytes = group + kMinsAt;
    const auto* d = reinterpret_cast<const float*>(group + kDAt);
    const SuperBlockRows<R, S> x(qx, first_row, g);
    const float* xs = x.scale;
    const int8_t* const* xq = x.codes;
    const int16_t* const* xsum = x.sums;
#pragma GCC unroll 1
    for (int quarter = 0; quarter < 4; ++quarter) {
      // Opaque per quarter, as in QuantTile: no broadcast hoisted out and spilled.
      const int8_t* xr[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = xq[r];
        asm("" : "+r"(xr[r]));
      }
      __m256i isum[R];
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 1
      for (int sb = 0; sb < kSubs; ++sb) {
        const unsigned char* quants = group + sb * kCodeBytes + quarter * kQuarterBytes;
        [[maybe_unused]] const __m256i high =
            kHigh > 0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 4 * S)) : _mm256_setzero_si256();
        const __m256i sc = ScalePairs<(kMinShift > 0)>(sc_bytes + sb * kPanelWidth + quarter * 8);
#pragma GCC unroll 8
        for (int step0 = 0; step0 < S / 4; step0 += kRun) {
          __m256i run[R];
          for (int r = 0; r < R; ++r) run[r] = _mm256_setzero_si256();
          [[maybe_unused]] __m256i odd_codes = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int t = 0; t < kRun; ++t) {
            const int step = step0 + t;
            if (t % 2 == 0) lines.Pass();
            __m256i wu;
            if (t % 2 == 0) {
              LoadNibblePair(quants, step / 2, &wu, &odd_codes);
            } else {
              wu = odd_codes;
            }
            if constexpr (kHigh > 0) wu = _mm256_or_si256(wu, HighBits<kHigh>(high, step));
            for (int r = 0; r < R; ++r) {
              const __m256i p = _mm256_maddubs_epi16(wu, Broadcast4(xr[r] + sb * S + step * 4));
              run[r] = t == 0 ? p : _mm256_add_epi16(run[r], p);
              asm("" : "+x"(run[r]));
            }
          }
          for (int r = 0; r < R; ++r) {
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(run[r], sc));
            asm("" : "+x"(isum[r]));
          }
        }
      }
      SuperBlockQuarterEnd<R, S, kMinShift>(sc_bytes, m_bytes, d, xsum, xs, quarter, isum, acc);
    }
  }
}

// SuperBlockTile over a byte panel (a staged copy, quant_panel_order.h) for at most 3
// rows, two quarters (16 outputs) at a time: each activation broadcast feeds two
// multiplies. The 6-row step (a weight load, six broadcasts, six vpmaddubsw) is bound by
// its loads on Zen 3, not by its multiplies: in a stand-alone loop of each step the
// 3 x 16 one (two weight loads, three broadcasts, six multiplies) did more multiply-adds
// a second (docs/benchmarks.md, "Zen 3: what limits the quantized kernels"). The registers
// hold six runs, six sums, two weights and a broadcast; the scale pairs are built where
// a run ends, one quarter's at a time. The integer sums are SuperBlockTile's, added in
// the same order, and the float step is the same (SuperBlockQuarterEnd): the same bits.
template <int R, int S, int kRun, int kMinShift>
void SuperBlockPairTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, int64_t g0, int64_t g1,
                        bool carry_in, QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
  static_assert(R >= 1 && R <= 3, "six runs and six sums beside two weights and a broadcast");
  const QuantizedRows& qx = *a.qx;
  constexpr int kSubs = 256 / S;
  constexpr int64_t kCodeBytes = 32 * S;
  constexpr int64_t kScalesAt = kSubs * kCodeBytes, kMinsAt = kScalesAt + kSubs * kPanelWidth;
  constexpr int64_t kDAt = kMinsAt + (kMinShift > 0 ? 0 : kSubs * kPanelWidth);
  constexpr int64_t group_bytes = kDAt + 256;
  if (!carry_in) {
    for (int r = 0; r < R; ++r)
      for (int o = 0; o < kPanelWidth; o += 8) _mm256_storeu_ps(acc[r] + o, _mm256_setzero_ps());
  }
  for (int64_t g = g0; g < g1; ++g) {
    const unsigned char* group = panel + (g - g0) * group_bytes;
    // A pass per run of kRun steps (two halves of kSubs sub-blocks of S / 4 steps): a pass
    // per step slowed the 16-row calls, the cursor's add, compare and branch finding no
    // room beside the step's vector operations (`crossreg-bench-decode --gemm_types
    // q4_k,q6_k --gemm_rows 16` times them).
    PrefetchCursor lines(prefetch, g - g0, 2 * kSubs * (S / 4 / kRun));
    const unsigned char* sc_bytes = group + kScalesAt;
    const unsigned char* m_bytes = group + kMinsAt;
    const auto* d = reinterpret_cast<const float*>(group + kDAt);
    const SuperBlockRows<R, S> x(qx, first_row, g);
    const float* xs = x.scale;
    const int8_t* const* xq = x.codes;
    const int16_t* const* xsum = x.sums;
#pragma GCC unroll 1
    for (int half = 0; half < 2; ++half) {
      const int q0 = 2 * half;  // quarters q0 and q0 + 1
      const int8_t* xr[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = xq[r];
        asm("" : "+r"(xr[r]));
      }
      __m256i isum0[R], isum1[R];
      for (int r = 0; r < R; ++r) isum0[r] = isum1[r] = _mm256_setzero_si256();
#pragma GCC unroll 1
      for (int sb = 0; sb < kSubs; ++sb) {
        const unsigned char* quants = group + sb * kCodeBytes + q0 * 32;
#pragma GCC unroll 8
        for (int step0 = 0; step0 < S / 4; step0 += kRun) {
          __m256i run0[R], run1[R];
#pragma GCC unroll 8
          for (int t = 0; t < kRun; ++t) {
            const int step = step0 + t;
            if (t == 0) lines.Pass();
            const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + step * kByteStepBytes));
            const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + step * kByteStepBytes + 32));
            for (int r = 0; r < R; ++r) {
              const __m256i x = Broadcast4(xr[r] + sb * S + step * 4);
              const __m256i p0 = _mm256_maddubs_epi16(w0, x);
              const __m256i p1 = _mm256_maddubs_epi16(w1, x);
              run0[r] = t == 0 ? p0 : _mm256_add_epi16(run0[r], p0);
              run1[r] = t == 0 ? p1 : _mm256_add_epi16(run1[r], p1);
              asm("" : "+x"(run0[r]), "+x"(run1[r]));
            }
          }
          const __m256i sc0 = ScalePairs<(kMinShift > 0)>(sc_bytes + sb * kPanelWidth + q0 * 8);
          for (int r = 0; r < R; ++r) {
            isum0[r] = _mm256_add_epi32(isum0[r], _mm256_madd_epi16(run0[r], sc0));
            asm("" : "+x"(isum0[r]));
          }
          const __m256i sc1 = ScalePairs<(kMinShift > 0)>(sc_bytes + sb * kPanelWidth + q0 * 8 + 8);
          for (int r = 0; r < R; ++r) {
            isum1[r] = _mm256_add_epi32(isum1[r], _mm256_madd_epi16(run1[r], sc1));
            asm("" : "+x"(isum1[r]));
          }
        }
      }
      SuperBlockQuarterEnd<R, S, kMinShift>(sc_bytes, m_bytes, d, xsum, xs, q0, isum0, acc);
      SuperBlockQuarterEnd<R, S, kMinShift>(sc_bytes, m_bytes, d, xsum, xs, q0 + 1, isum1, acc);
    }
  }
}

// Unpacks `n` super-blocks of a nibble panel (kHigh high bits a code) into the byte
// panel's layout (packed_weights.h): the same codes a byte each, the same scales, mins
// and d after them.
template <int S, int kHigh, int kMinShift>
void StageNibbleSuperBlocks(const unsigned char* src, int64_t n, unsigned char* dst) {
  constexpr int kSubs = 256 / S;
  constexpr int64_t kQuarterBytes = 4 * S + (kHigh > 0 ? 32 : 0);
  constexpr int64_t kNibCodes = kSubs * 4 * kQuarterBytes, kByteCodes = kSubs * 32 * S;
  constexpr int64_t kRest = kSubs * kPanelWidth * (kMinShift > 0 ? 1 : 2) + 256;  // scales, mins, d and dmin
  for (int64_t g = 0; g < n; ++g, src += kNibCodes + kRest, dst += kByteCodes + kRest) {
#pragma GCC unroll 1
    for (int sb = 0; sb < kSubs; ++sb) {
#pragma GCC unroll 4
      for (int quarter = 0; quarter < 4; ++quarter) {
        const unsigned char* quants = src + sb * 4 * kQuarterBytes + quarter * kQuarterBytes;
        unsigned char* out = dst + sb * 32 * S + quarter * 32;
        [[maybe_unused]] const __m256i high =
            kHigh > 0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 4 * S)) : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < S / 8; ++t) {
          __m256i even, odd;
          LoadNibblePair(quants, t, &even, &odd);
          if constexpr (kHigh > 0) {
            even = _mm256_or_si256(even, HighBits<kHigh>(high, 2 * t));
            odd = _mm256_or_si256(odd, HighBits<kHigh>(high, 2 * t + 1));
          }
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * t * kByteStepBytes), even);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (2 * t + 1) * kByteStepBytes), odd);
        }
      }
    }
    std::memcpy(dst + kByteCodes, src + kNibCodes, kRest);
  }
}

// RunQuantPanels' run_tile over these panels: the tile's rows (at most kQuantTileRowsAvx2)
// as a template argument.
template <int S, int kRun, int kMinShift, int kHigh>
auto SuperBlockTiles(const PanelArgs& a) {
  return [&a](const unsigned char* panel, const RowTile& tile, int64_t g0, int64_t g1, bool carry_in,
              QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
    const int64_t row = tile.first_row;
    WithTileRows<6>(tile.rows, [&](auto rows) {
      SuperBlockTile<decltype(rows)::value, S, kRun, kMinShift, kHigh>(a, panel, row, g0, g1, carry_in, prefetch, acc);
    });
  };
}

// RunStagedQuantPanels' run_tile: a tile's rows over the staged byte panel in
// SuperBlockPairTile's tiles of at most 3 rows (6 as 3 + 3, 5 as 3 + 2, 4 as 2 + 2), the
// first of them requesting the tile's share of the next lines.
template <int S, int kRun, int kMinShift>
auto SuperBlockPairTiles(const PanelArgs& a) {
  return [&a](const unsigned char* panel, const RowTile& tile, int64_t g0, int64_t g1, bool carry_in,
              QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
    const int64_t row = tile.first_row;
    switch (tile.rows) {
      case 6:
        SuperBlockPairTile<3, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
        return SuperBlockPairTile<3, S, kRun, kMinShift>(a, panel, row + 3, g0, g1, carry_in, {}, acc + 3);
      case 5:
        SuperBlockPairTile<3, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
        return SuperBlockPairTile<2, S, kRun, kMinShift>(a, panel, row + 3, g0, g1, carry_in, {}, acc + 3);
      case 4:
        SuperBlockPairTile<2, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
        return SuperBlockPairTile<2, S, kRun, kMinShift>(a, panel, row + 2, g0, g1, carry_in, {}, acc + 2);
      case 3: return SuperBlockPairTile<3, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
      case 2: return SuperBlockPairTile<2, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
      default: return SuperBlockPairTile<1, S, kRun, kMinShift>(a, panel, row, g0, g1, carry_in, prefetch, acc);
    }
  };
}

// The super-block formats' nibble panels (every layout LayoutFor makes for them).
template <int S, int kRun, int kMinShift = 0, int kHigh = 0>
void SuperBlockPanels(const PanelArgs& a, int64_t begin, int64_t end) {
  if (a.num_tiles > 1) {
    // Unpacked once per panel or block for all the tiles (quant_panel_order.h).
    return RunStagedQuantPanels(a, begin, end, SuperBlockPairTiles<S, kRun, kMinShift>(a));
  }
  RunQuantPanels(a, begin, end, SuperBlockTiles<S, kRun, kMinShift, kHigh>(a));
}

template <int S, bool kSigned, bool kMin, int kRun, bool kNib = false, bool kF16 = true>
void Panels(const PanelArgs& a, int64_t begin, int64_t end) {
  RunQuantPanels(a, begin, end,
                 [&a](const unsigned char* panel, const RowTile& tile, int64_t g0, int64_t g1, bool carry_in,
                      QuantPrefetch prefetch, float (*acc)[kPanelWidth]) {
                   const int64_t row = tile.first_row;
                   WithTileRows<4>(tile.rows, [&](auto rows) {
                     QuantTile<decltype(rows)::value, S, kSigned, kMin, kRun, kNib, kF16>(a, panel, row, g0, g1, carry_in, prefetch, acc);
                   });
                 });
}

}  // namespace

void StageNibbleSuperBlocksAvx2(const QuantGroupLayout& l, const unsigned char* src, int64_t n, unsigned char* dst) {
  if (l.sub_block == 32 && l.min_shift == 0 && l.high_bits == 0) return StageNibbleSuperBlocks<32, 0, 0>(src, n, dst);
  if (l.sub_block == 32 && l.min_shift == 0 && l.high_bits == 1) return StageNibbleSuperBlocks<32, 1, 0>(src, n, dst);
  if (l.sub_block == 16 && l.min_shift == 0 && l.high_bits == 0) return StageNibbleSuperBlocks<16, 0, 0>(src, n, dst);
  if (l.sub_block == 16 && l.min_shift == 2 && l.high_bits == 0) return StageNibbleSuperBlocks<16, 0, 2>(src, n, dst);
  if (l.sub_block == 16 && l.min_shift == 5 && l.high_bits == 2) return StageNibbleSuperBlocks<16, 2, 5>(src, n, dst);
  std::abort();  // LayoutFor makes no other nibble super-block layout
}

void QuantPanelsAvx2(const PanelArgs& a, int64_t begin, int64_t end) {
  const QuantGroupLayout& l = a.w->quant();
  // The formats' layouts (engine/cpu/packed_weights.cc LayoutFor); any other falls back
  // to the portable kernel, which reads every layout.
  if (l.super_block == 256) {
    // Q4_K, Q2_K, Q5_K (a high bit), Q6_K (two), Q3_K: all nibble panels.
    if (!l.nibbles) return QuantPanelsScalar(a, begin, end);
    if (l.min_shift == 0 && l.high_bits == 0 && l.sub_block == 32 && l.int16_steps == 8) {
      return SuperBlockPanels<32, 8>(a, begin, end);
    }
    if (l.min_shift == 0 && l.high_bits == 0 && l.sub_block == 16 && l.int16_steps == 4) {
      return SuperBlockPanels<16, 4>(a, begin, end);
    }
    if (l.min_shift == 0 && l.high_bits == 1 && l.sub_block == 32 && l.int16_steps == 4) {
      return SuperBlockPanels<32, 4, 0, 1>(a, begin, end);
    }
    if (l.min_shift == 5 && l.high_bits == 2 && l.sub_block == 16 && l.int16_steps == 2) {
      return SuperBlockPanels<16, 2, 5, 2>(a, begin, end);
    }
    if (l.min_shift == 2 && l.high_bits == 0 && l.sub_block == 16 && l.int16_steps == 4) {
      return SuperBlockPanels<16, 4, 2>(a, begin, end);
    }
    return QuantPanelsScalar(a, begin, end);
  }
  if (!l.f16_scales) {  // IQ4_XS: f32 scales
    if (l.sub_block == 32 && l.signed_quants && !l.has_min && l.int16_steps == 1) {
      return Panels<32, true, false, 1, false, false>(a, begin, end);
    }
    return QuantPanelsScalar(a, begin, end);
  }
  if (l.nibbles) {
    if (l.sub_block == 32 && !l.signed_quants && l.has_min && l.int16_steps == 8) return Panels<32, false, true, 8, true>(a, begin, end);
    if (l.sub_block == 16 && !l.signed_quants && l.has_min && l.int16_steps == 4) return Panels<16, false, true, 4, true>(a, begin, end);
    return QuantPanelsScalar(a, begin, end);
  }
  if (l.sub_block == 32 && l.signed_quants && !l.has_min && l.int16_steps == 1) return Panels<32, true, false, 1>(a, begin, end);
  if (l.sub_block == 32 && !l.signed_quants && l.has_min && l.int16_steps == 8) return Panels<32, false, true, 8>(a, begin, end);
  if (l.sub_block == 32 && !l.signed_quants && l.has_min && l.int16_steps == 4) return Panels<32, false, true, 4>(a, begin, end);
  if (l.sub_block == 16 && l.signed_quants && !l.has_min && l.int16_steps == 4) return Panels<16, true, false, 4>(a, begin, end);
  QuantPanelsScalar(a, begin, end);
}

void QuantizeRowsAvx2(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, float* sum16) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / 32; ++b) {
      const float* v = x + r * in + b * 32;
      __m256 x4[4];
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        x4[i] = _mm256_loadu_ps(v + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, x4[i]));
      }
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_movehdup_ps(m));
      const float d = _mm_cvtss_f32(m) / 127.0f;
      const float id = d > 0 ? 1.0f / d : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      __m256i i32[4];
      for (int i = 0; i < 4; ++i) {
        // The default rounding mode: nearest even, as the scalar nearbyint. |x * id| <=
        // 127 up to rounding; the clamp keeps a rounded 127.00001 at 127.
        __m256 t = _mm256_round_ps(_mm256_mul_ps(x4[i], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        i32[i] = _mm256_cvtps_epi32(t);
      }
      // Sums of each 16: lanes of i32[0] + i32[1], and of i32[2] + i32[3].
      for (int h = 0; h < 2; ++h) {
        __m256i s = _mm256_add_epi32(i32[2 * h], i32[2 * h + 1]);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        s4 = _mm_hadd_epi32(s4, s4);
        sum16[r * (in / 16) + 2 * b + h] = static_cast<float>(_mm_cvtsi128_si32(s4));
      }
      // int32 -> int8, in order: packs interleave 128-bit lanes, the permute undoes it.
      const __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]);
      const __m256i p16b = _mm256_packs_epi32(i32[2], i32[3]);
      __m256i p8 = _mm256_packs_epi16(p16a, p16b);
      p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + r * in + b * 32), p8);
      scale[r * (in / 32) + b] = d;
    }
  }
}

void QuantizeRows256Avx2(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, int16_t* sum16,
                         int16_t* sum32) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < in / 256; ++b) {
      const float* v = x + r * in + b * 256;
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 32; ++i) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(v + 8 * i)));
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_movehdup_ps(m));
      const float d = _mm_cvtss_f32(m) / 127.0f;
      const float id = d > 0 ? 1.0f / d : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      for (int c = 0; c < 8; ++c) {  // chunks of 32, as QuantizeRowsAvx2's blocks
        __m256i i32[4];
        for (int i = 0; i < 4; ++i) {
          __m256 t = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(v + 32 * c + 8 * i), vid),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
          i32[i] = _mm256_cvtps_epi32(t);
        }
        int halves[2];
        for (int h = 0; h < 2; ++h) {
          __m256i s = _mm256_add_epi32(i32[2 * h], i32[2 * h + 1]);
          __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
          s4 = _mm_hadd_epi32(s4, s4);
          s4 = _mm_hadd_epi32(s4, s4);
          halves[h] = _mm_cvtsi128_si32(s4);
          sum16[r * (in / 16) + b * 16 + 2 * c + h] = static_cast<int16_t>(halves[h]);
        }
        sum32[r * (in / 32) + b * 8 + c] = static_cast<int16_t>(halves[0] + halves[1]);
        const __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]);
        const __m256i p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + r * in + b * 256 + 32 * c), p8);
      }
      scale[r * (in / 256) + b] = d;
    }
  }
}

}  // namespace crossreg::cpu::internal
