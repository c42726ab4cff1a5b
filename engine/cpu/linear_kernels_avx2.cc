// AVX2 + FMA micro-kernels (8 lanes, 16 vector registers): tiles of up to 2 rows x 32
// outputs, 8 accumulators. bf16 panels widen each weight pair to f32. Compiled with
// -mavx2 -mfma; called only after run-time detection.
#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/linear_kernels.h"

namespace crossreg::cpu::internal {
namespace {

inline void Store(float* y, const __m256 (&acc)[4], int64_t width) {
  if (width == kPanelWidth) {
    for (int q = 0; q < 4; ++q) _mm256_storeu_ps(y + 8 * q, acc[q]);
    return;
  }
  alignas(32) float tmp[kPanelWidth];
  for (int q = 0; q < 4; ++q) _mm256_store_ps(tmp + 8 * q, acc[q]);
  std::copy_n(tmp, width, y);
}

template <int R>
void F32Tile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t width) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_ps();
  const auto* p = reinterpret_cast<const float*>(a.w->panel(j));
  const auto* x = static_cast<const float*>(tile.x);
  for (int64_t k = 0; k < a.w->k_steps(); ++k, x += R) {
    for (int q = 0; q < 4; ++q) {
      const __m256 w = _mm256_load_ps(p + k * kPanelWidth + 8 * q);
      for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[r]), acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r) Store(a.y + (tile.first_row + r) * a.y_stride + j * kPanelWidth, acc[r], width);
}

template <int R>
void Bf16Tile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t width) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const unsigned char* p = a.w->panel(j);
  const auto* x = static_cast<const int*>(tile.x);
  for (int64_t k = 0; k < a.w->k_steps(); ++k, x += R) {
    __m256 xe[R], xo[R];
    for (int r = 0; r < R; ++r) {
      const __m256i v = _mm256_set1_epi32(x[r]);
      xe[r] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      xo[r] = _mm256_castsi256_ps(_mm256_and_si256(v, high));
    }
    for (int q = 0; q < 4; ++q) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + k * kPanelStepBytes + 32 * q));
      const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
      const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(w, high));
      for (int r = 0; r < R; ++r) {
        acc[r][q] = _mm256_fmadd_ps(we, xe[r], acc[r][q]);
        acc[r][q] = _mm256_fmadd_ps(wo, xo[r], acc[r][q]);
      }
    }
  }
  for (int r = 0; r < R; ++r) Store(a.y + (tile.first_row + r) * a.y_stride + j * kPanelWidth, acc[r], width);
}

}  // namespace

void PanelsAvx2(const PanelArgs& a, int64_t begin, int64_t end) {
  const bool f32 = a.w->format() == PanelFormat::kF32;
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    for (int t = 0; t < a.num_tiles; ++t) {
      const RowTile& tile = a.tiles[t];
      if (tile.rows == 2) {
        f32 ? F32Tile<2>(a, j, tile, width) : Bf16Tile<2>(a, j, tile, width);
      } else {
        f32 ? F32Tile<1>(a, j, tile, width) : Bf16Tile<1>(a, j, tile, width);
      }
    }
  }
}

}  // namespace crossreg::cpu::internal
