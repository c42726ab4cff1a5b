// AVX-512 VNNI kQ8 kernel (engine/cpu/linear_kernels.h): vpdpbusd multiplies 8 outputs'
// 4 consecutive quants with 4 broadcast activation bytes and adds the four products to
// each output's int32 sum in one instruction, where the AVX2 kernel needs vpmaddubsw,
// vpmaddwd and an add. The panel layout is the AVX2 kernel's (256-bit quarters of 8
// outputs), but a step loads all four quarters and broadcasts each row's 4 bytes once for
// them, and the 16 extra vector registers of AVX-512 hold 4 rows x 4 quarters of sums.
//
// vpdpbusd takes one operand unsigned and one signed. Formats with mins store unsigned
// quants: they go in as they are, against the signed activations. Signed quants (Q8_0,
// Q6_K) go in as the signed operand against the activations offset to unsigned (x + 128,
// a flip of the top bit), and the group's sum of 128 * w per output, taken once per step
// for all rows, comes off at the end. Every sum is exact in int32 and the float steps are
// the scalar kernel's, so the results agree bit for bit. Compiled with AVX-512 F/BW/VL/DQ
// and VNNI; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/cpu/linear_kernels.h"

namespace crossreg::cpu::internal {
namespace {

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// One tile of R rows over one panel: acc (R x 32 floats) accumulates group after group.
template <int R, int S, bool kSigned, bool kMin>
void QuantTile(const PanelArgs& a, const unsigned char* panel, int64_t first_row, QuantPrefetch prefetch,
               float (*acc)[kPanelWidth]) {
  const QuantizedRows& qx = *a.qx;
  const int64_t in = qx.in;
  const int64_t groups = a.w->k_steps();
  const int64_t group_bytes = a.w->quant().group_bytes();
  const __m256i top_bit = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi8(1);
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < kPanelWidth; o += 8) _mm256_storeu_ps(acc[r] + o, _mm256_setzero_ps());
  for (int64_t g = 0; g < groups; ++g) {
    const unsigned char* group = panel + g * group_bytes;
    const unsigned char* ahead = prefetch.from + g * prefetch.lines * 64;
    for (int64_t l = 0; l < prefetch.lines; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + l * 64), _MM_HINT_T0);
    }
    const auto* scales = reinterpret_cast<const float*>(group + 32 * S);
    const int8_t* xq[R];
    for (int r = 0; r < R; ++r) xq[r] = qx.q + (first_row + r) * in + g * S;
    __m256i isum[R][4];
    __m256i wsum[4];  // signed formats: the group's quants summed per output
    for (int q = 0; q < 4; ++q) {
      wsum[q] = _mm256_setzero_si256();
      for (int r = 0; r < R; ++r) isum[r][q] = _mm256_setzero_si256();
    }
    for (int step = 0; step < S / 4; ++step) {
      __m256i w[4];
      for (int q = 0; q < 4; ++q) {
        w[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + (q * (S / 4) + step) * 32));
        if constexpr (kSigned) wsum[q] = _mm256_dpbusd_epi32(wsum[q], ones, w[q]);
      }
      for (int r = 0; r < R; ++r) {
        const __m256i x = Broadcast4(xq[r] + step * 4);
        if constexpr (kSigned) {
          const __m256i xu = _mm256_xor_si256(x, top_bit);  // x + 128, as unsigned bytes
          for (int q = 0; q < 4; ++q) isum[r][q] = _mm256_dpbusd_epi32(isum[r][q], xu, w[q]);
        } else {
          for (int q = 0; q < 4; ++q) isum[r][q] = _mm256_dpbusd_epi32(isum[r][q], w[q], x);
        }
      }
    }
    float xs[R];
    float xsum[R];  // the row's sum of the group's codes times its scale
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
      xs[r] = qx.scale[row * (in / 32) + (g * S) / 32];
      if constexpr (kMin) {
        const float* s16 = qx.sum16 + row * (in / 16) + (g * S) / 16;
        xsum[r] = (S == 16 ? s16[0] : s16[0] + s16[1]) * xs[r];
      }
    }
    for (int q = 0; q < 4; ++q) {
      const __m256 ws = _mm256_loadu_ps(scales + 8 * q);
      const __m256i offset = _mm256_slli_epi32(wsum[q], 7);  // 128 * sum(w)
      for (int r = 0; r < R; ++r) {
        const __m256i exact = kSigned ? _mm256_sub_epi32(isum[r][q], offset) : isum[r][q];
        __m256 v = _mm256_loadu_ps(acc[r] + 8 * q);
        v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(ws, _mm256_set1_ps(xs[r])), v);
        if constexpr (kMin) {
          const __m256 wm = _mm256_loadu_ps(scales + kPanelWidth + 8 * q);
          v = _mm256_fnmadd_ps(_mm256_set1_ps(xsum[r]), wm, v);
        }
        _mm256_storeu_ps(acc[r] + 8 * q, v);
      }
    }
  }
}

template <int S, bool kSigned, bool kMin>
void Tile(const PanelArgs& a, const unsigned char* panel, const RowTile& tile, QuantPrefetch prefetch,
          float (*acc)[kPanelWidth]) {
  switch (tile.rows) {
    case 4: return QuantTile<4, S, kSigned, kMin>(a, panel, tile.first_row, prefetch, acc);
    case 3: return QuantTile<3, S, kSigned, kMin>(a, panel, tile.first_row, prefetch, acc);
    case 2: return QuantTile<2, S, kSigned, kMin>(a, panel, tile.first_row, prefetch, acc);
    default: return QuantTile<1, S, kSigned, kMin>(a, panel, tile.first_row, prefetch, acc);
  }
}

template <int S, bool kSigned, bool kMin>
void Panels(const PanelArgs& a, int64_t begin, int64_t end) {
  alignas(32) float acc[kQuantTileRows][kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    const unsigned char* panel = a.w->panel(j);
    for (int t = 0; t < a.num_tiles; ++t) {
      const RowTile& tile = a.tiles[t];
      Tile<S, kSigned, kMin>(a, panel, tile, QuantPrefetchFor(a, panel, t), acc);
      for (int64_t r = 0; r < tile.rows; ++r) {
        std::copy_n(acc[r], width, a.y + (tile.first_row + r) * a.y_stride + j * kPanelWidth);
      }
    }
  }
}

}  // namespace

void QuantPanelsAvx512Vnni(const PanelArgs& a, int64_t begin, int64_t end) {
  const QuantGroupLayout& l = a.w->quant();
  // The formats' layouts (engine/cpu/packed_weights.cc LayoutFor); int32 sums need no
  // int16 runs. Any other layout falls back to the portable kernel, which reads every one.
  if (l.sub_block == 32 && l.signed_quants && !l.has_min) return Panels<32, true, false>(a, begin, end);
  if (l.sub_block == 32 && !l.signed_quants && l.has_min) return Panels<32, false, true>(a, begin, end);
  if (l.sub_block == 16 && l.signed_quants && !l.has_min) return Panels<16, true, false>(a, begin, end);
  QuantPanelsScalar(a, begin, end);
}

}  // namespace crossreg::cpu::internal
