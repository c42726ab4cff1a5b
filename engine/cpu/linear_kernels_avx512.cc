// AVX-512 F micro-kernels: f32 panels with FMA, and bf16 panels widened to f32 (AVX-512
// CPUs without AVX512_BF16, and those whose vdpbf16ps is slower than two FMAs:
// engine/cpu/bf16_panel_kernel.h). Compiled with -mavx512f etc.; called only after
// run-time detection. Also the AVX-512 packing of activation tiles to bf16.
#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/linear_kernels.h"
#include "engine/cpu/linear_kernels_avx512_tile.h"

namespace crossreg::cpu::internal {
namespace {

// f32 panel: per k, w[32 outputs] x broadcast x[k][r].
struct F32Step {
  template <int R>
  static void Run(const unsigned char* panel, int64_t k0, int64_t k1, const void* tile_x, const PanelPrefetch& pf,
                  __m512 (&acc)[R][2]) {
    const auto* p = reinterpret_cast<const float*>(panel);
    const float* x = static_cast<const float*>(tile_x) + k0 * R;
    for (int64_t k = k0; k < k1; ++k, x += R) {
      const __m512 w0 = _mm512_load_ps(p + k * kPanelWidth);
      const __m512 w1 = _mm512_load_ps(p + k * kPanelWidth + 16);
      PrefetchStep(pf, panel, k, k - k0);
      for (int r = 0; r < R; ++r) {
        const __m512 xb = _mm512_set1_ps(x[r]);
        acc[r][0] = _mm512_fmadd_ps(w0, xb, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(w1, xb, acc[r][1]);
      }
    }
  }
};

// bf16 panel through f32 FMAs: each 32-bit lane holds a weight pair, its even and odd
// halves widened to f32 once per K step for all the tile's rows; the activations arrive
// widened too (WidenBf16Pairs: per step and row, the even then the odd value as f32), so
// each row costs 4 FMAs with broadcast operands and nothing else. Even before odd, as the
// portable kernel adds them: the two agree bitwise.
struct Bf16WideStep {
  template <int R>
  static void Run(const unsigned char* panel, int64_t k0, int64_t k1, const void* tile_x, const PanelPrefetch& pf,
                  __m512 (&acc)[R][2]) {
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const float* x = static_cast<const float*>(tile_x) + k0 * R * 2;
    for (int64_t k = k0; k < k1; ++k, x += 2 * R) {
      const __m512i w0 = _mm512_load_si512(panel + k * kPanelStepBytes);
      const __m512i w1 = _mm512_load_si512(panel + k * kPanelStepBytes + 64);
      PrefetchStep(pf, panel, k, k - k0);
      const __m512 w0e = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16));
      const __m512 w0o = _mm512_castsi512_ps(_mm512_and_si512(w0, high));
      const __m512 w1e = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16));
      const __m512 w1o = _mm512_castsi512_ps(_mm512_and_si512(w1, high));
      for (int r = 0; r < R; ++r) {
        const __m512 xe = _mm512_set1_ps(x[2 * r]);
        const __m512 xo = _mm512_set1_ps(x[2 * r + 1]);
        acc[r][0] = _mm512_fmadd_ps(w0e, xe, acc[r][0]);
        acc[r][0] = _mm512_fmadd_ps(w0o, xo, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(w1e, xe, acc[r][1]);
        acc[r][1] = _mm512_fmadd_ps(w1o, xo, acc[r][1]);
      }
    }
  }
};

// Round to nearest even as F32ToBf16 does (bits + 0x7fff + lsb of the kept half), NaN
// kept quiet: 16 lanes of f32 bits -> 16 bf16 in the low halves.
inline __m512i RoundBf16(__m512i bits) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40)));
}

// 16 pairs of bf16 from 32 f32 values at xr (fewer where the masks say): even values in
// the low halves, odd in the high; zero for a row past the tile (`valid` false).
inline __m512i PairsOf(const float* xr, bool valid, __mmask16 m_lo, __mmask16 m_hi) {
  if (!valid) return _mm512_setzero_si512();
  const __m512i lo = RoundBf16(_mm512_castps_si512(_mm512_maskz_loadu_ps(m_lo, xr)));
  const __m512i hi = RoundBf16(_mm512_castps_si512(_mm512_maskz_loadu_ps(m_hi, xr + 16)));
  // Lanes of lo are values k..k+15 -> pairs p..p+7; hi -> pairs p+8..p+15.
  const __m512i even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i even = _mm512_permutex2var_epi32(lo, even_idx, hi);
  const __m512i odd = _mm512_permutex2var_epi32(lo, odd_idx, hi);
  return _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
}

// In place: v[i] lane j <- v[j] lane i (16 x 16 32-bit elements).
inline void Transpose16x16(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);      // per 128-bit lane: a0 b0 a1 b1
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);  // a2 b2 a3 b3
  }
  __m512i u[16];  // u[4k + m], lane l: rows 4k..4k+3 of column 4l + m
  for (int k = 0; k < 4; ++k) {
    u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  // Column 4l + m is lane l of u[m], u[4 + m], u[8 + m], u[12 + m]: a 4 x 4 transpose of
  // 128-bit lanes.
  for (int m = 0; m < 4; ++m) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44);      // A0 A1 B0 B1
    const __m512i x1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);      // A2 A3 B2 B3
    const __m512i x2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);  // C0 C1 D0 D1
    const __m512i x3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);  // C2 C3 D2 D3
    v[m] = _mm512_shuffle_i32x4(x0, x2, 0x88);       // A0 B0 C0 D0
    v[4 + m] = _mm512_shuffle_i32x4(x0, x2, 0xDD);   // A1 B1 C1 D1
    v[8 + m] = _mm512_shuffle_i32x4(x1, x3, 0x88);   // A2 B2 C2 D2
    v[12 + m] = _mm512_shuffle_i32x4(x1, x3, 0xDD);  // A3 B3 C3 D3
  }
}

}  // namespace

void PanelsAvx512(const PanelArgs& a, int64_t begin, int64_t end) {
  if (a.w->format() == PanelFormat::kF32) {
    RunPanels<F32Step>(a, begin, end);
  } else {
    RunPanels<Bf16WideStep>(a, begin, end);
  }
}

void PackRowTilesBf16Avx512(const float* x, int64_t in, int64_t first, int64_t rows, uint32_t* out) {
  const int64_t steps = (in + 1) / 2;
  // Up to 16 rows at a time: each row's next 16 pairs in one register, the 16 x 16 block
  // transposed in registers, then one store per pair of the group's rows (contiguous in
  // the tile layout). Storing each row's pairs one by one, `rows` apart (a store and a
  // load through memory per pair), takes 2-3x as long, a few percent of a 32-row verify
  // forward of the ~110M model (`crossreg-bench-decode --rows 32` times it).
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int group = static_cast<int>(std::min<int64_t>(16, rows - r0));
    const __mmask16 lanes = static_cast<__mmask16>((1u << group) - 1u);
    for (int64_t p = 0; p < steps; p += 16) {
      const int64_t k = 2 * p;
      const int64_t left = in - k;  // values from k on
      const __mmask16 m_lo = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
      const __mmask16 m_hi = left >= 32 ? __mmask16(0xffff)
                                        : (left > 16 ? static_cast<__mmask16>((1u << (left - 16)) - 1u) : 0);
      const int64_t n = std::min<int64_t>(16, steps - p);
      if (rows == 1) {  // one row: its pairs are already in the tile's order
        _mm512_mask_storeu_epi32(out + p, static_cast<__mmask16>((1u << n) - 1u),
                                 PairsOf(x + first * in + k, true, m_lo, m_hi));
        continue;
      }
      __m512i v[16];
      for (int r = 0; r < 16; ++r) v[r] = PairsOf(x + (first + r0 + r) * in + k, r < group, m_lo, m_hi);
      Transpose16x16(v);
      uint32_t* dst = out + p * rows + r0;
      for (int64_t i = 0; i < n; ++i) _mm512_mask_storeu_epi32(dst + i * rows, lanes, v[i]);
    }
  }
}

void PackRowTileBf16Amx(const float* x, int64_t in, int64_t first, int64_t rows, int64_t rows_read, uint32_t* out) {
  const int64_t steps = (in + 1) / 2;
  const int64_t blocks = AmxBlocks(in);
  // One register of 16 pairs a row and block: zeros past K and in the rows past the tile.
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t p = b * kAmxBlockPairs;
    const int64_t k = 2 * p;
    for (int64_t r = 0; r < rows_read; ++r) {
      uint32_t* dst = out + b * kAmxBlockPairsPerTile + r * kAmxBlockPairs;
      const int64_t left = r < rows && p < steps ? in - k : 0;  // values from k on
      const __mmask16 m_lo = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
      const __mmask16 m_hi = left >= 32 ? __mmask16(0xffff)
                                        : (left > 16 ? static_cast<__mmask16>((1u << (left - 16)) - 1u) : 0);
      _mm512_storeu_si512(dst, left > 0 ? PairsOf(x + (first + r) * in + k, true, m_lo, m_hi)
                                        : _mm512_setzero_si512());
    }
  }
}

}  // namespace crossreg::cpu::internal
