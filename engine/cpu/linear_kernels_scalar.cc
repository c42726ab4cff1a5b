// Portable micro-kernels: the reference every SIMD path is compared with, and what a
// CPU without AVX2 runs. Also the row-tile packing every path shares.
#include <algorithm>
#include <cstring>

#include "engine/cpu/linear_kernels.h"
#include "engine/dtype.h"

namespace crossreg::cpu::internal {

std::vector<std::pair<int64_t, int64_t>> PlanRowTiles(int64_t rows, int64_t max) {
  std::vector<std::pair<int64_t, int64_t>> tiles;
  const int64_t count = (rows + max - 1) / max;
  // Up to four tiles: equal sizes. Beyond (prefill): full tiles and one remainder.
  const int64_t size = count <= 4 ? (rows + count - 1) / count : max;
  for (int64_t r = 0; r < rows; r += size) tiles.emplace_back(r, std::min(size, rows - r));
  return tiles;
}

std::vector<int64_t> PackRowTilesF32(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                                     float* out) {
  std::vector<int64_t> starts;
  int64_t offset = 0;
  for (const auto& [first, rows] : tiles) {
    starts.push_back(offset);
    for (int64_t k = 0; k < in; ++k) {
      for (int64_t r = 0; r < rows; ++r) out[offset + k * rows + r] = x[(first + r) * in + k];
    }
    offset += in * rows;
  }
  return starts;
}

// Rounds to bf16 (nearest even) the way F32ToBf16 does; packs tiles of pairs.
void PackRowTilesBf16Avx512(const float* x, int64_t in, int64_t first, int64_t rows, uint32_t* out);

std::vector<int64_t> RowTileStartsBf16(int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles) {
  std::vector<int64_t> starts;
  int64_t offset = 0;
  for (const auto& tile : tiles) {
    starts.push_back(offset);
    offset += (in + 1) / 2 * tile.second;
  }
  return starts;
}

void PackRowTilesBf16Range(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                           const std::vector<int64_t>& starts, uint32_t* out, bool avx512, int64_t begin,
                           int64_t end) {
  const int64_t steps = (in + 1) / 2;
  for (int64_t t = begin; t < end; ++t) {
    const auto [first, rows] = tiles[static_cast<size_t>(t)];
    uint32_t* tile_out = out + starts[static_cast<size_t>(t)];
    if (avx512) {
      PackRowTilesBf16Avx512(x, in, first, rows, tile_out);
      continue;
    }
    for (int64_t p = 0; p < steps; ++p) {
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + (first + r) * in;
        const uint32_t lo = F32ToBf16(xr[2 * p]);
        const uint32_t hi = 2 * p + 1 < in ? F32ToBf16(xr[2 * p + 1]) : 0;
        tile_out[p * rows + r] = lo | (hi << 16);
      }
    }
  }
}

void WidenBf16Pairs(const uint32_t* pairs, int64_t begin, int64_t end, float* out) {
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t even = pairs[i] << 16, odd = pairs[i] & 0xffff0000u;
    std::memcpy(out + 2 * i, &even, sizeof(float));
    std::memcpy(out + 2 * i + 1, &odd, sizeof(float));
  }
}

void PanelsScalar(const PanelArgs& a, int64_t begin, int64_t end) {
  const PackedWeights& w = *a.w;
  const int64_t steps = w.k_steps();
  float acc[kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const int64_t o0 = j * kPanelWidth;
    const int width = static_cast<int>(std::min<int64_t>(kPanelWidth, w.out() - o0));
    for (int t = 0; t < a.num_tiles; ++t) {
      const RowTile& tile = a.tiles[t];
      for (int64_t r = 0; r < tile.rows; ++r) {
        std::fill_n(acc, kPanelWidth, 0.0f);
        if (w.format() == PanelFormat::kF32) {
          const auto* p = reinterpret_cast<const float*>(w.panel(j));
          const auto* x = static_cast<const float*>(tile.x);
          for (int64_t k = 0; k < steps; ++k) {
            const float xv = x[k * tile.rows + r];
            for (int o = 0; o < kPanelWidth; ++o) acc[o] += p[k * kPanelWidth + o] * xv;
          }
        } else {
          const auto* p = reinterpret_cast<const uint16_t*>(w.panel(j));
          const auto* x = static_cast<const uint32_t*>(tile.x);
          for (int64_t k = 0; k < steps; ++k) {
            const uint32_t pair = x[k * tile.rows + r];
            const float x0 = Bf16ToF32(static_cast<uint16_t>(pair & 0xffff)), x1 = Bf16ToF32(static_cast<uint16_t>(pair >> 16));
            const uint16_t* wk = p + k * 2 * kPanelWidth;
            for (int o = 0; o < kPanelWidth; ++o) {
              acc[o] += Bf16ToF32(wk[2 * o]) * x0;
              acc[o] += Bf16ToF32(wk[2 * o + 1]) * x1;
            }
          }
        }
        std::copy_n(acc, width, a.y + (tile.first_row + r) * a.y_stride + o0);
      }
    }
  }
}

}  // namespace crossreg::cpu::internal
