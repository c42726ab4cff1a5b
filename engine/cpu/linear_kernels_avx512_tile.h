// The tile loop shared by the AVX-512 kernel files (include only from files compiled
// with AVX-512): each row tile (up to 12 rows) is a fixed-R instance of a Step that runs
// K steps [k0, k1) of one panel: Step::Run<R>(panel, k0, k1, tile_x, prefetch, acc),
// acc[R][2] holding the tile's 32 outputs per row in two registers.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/cpu/linear_kernels.h"

namespace crossreg::cpu::internal {

inline constexpr int kRowTile = 12;
// The weights stream from memory once: ask for them a K block (8 KiB) ahead, so the
// next block arrives while the tiles work on this one.
inline constexpr int64_t kPrefetchSteps = 64;
// A K block of a panel small enough to stay in L1 (64 steps = 8 KiB) while every row
// tile runs over it, so with more rows than one tile the weights still stream from
// memory once, overlapped with the math.
inline constexpr int64_t kStepBlock = 64;

inline constexpr int64_t kLineBytes = 64;

// What one tile's pass over K steps asks for ahead of its use.
//  - By default (`share` null): the pass's own panel, kPrefetchSteps ahead, both lines of
//    each step. With three or more row tiles per K block every tile does this, the later
//    tiles repeating the first one's requests: their passes are long enough (11-12 rows)
//    that the memory keeps up, and without the repeats the calls run 2-10% slower.
//  - With exactly two tiles (13-24 rows) the next block's 128 lines are split between the
//    two passes, one line per step each (`lines` lines from `share`). The default would ask
//    for the whole block during the first pass only, twice the rate the memory delivers,
//    and nothing during the second; spread over both passes, T(16) and T(24) are 3-9%
//    faster on 2 Zen 5 cores (`crossreg-bench-decode --rows 1,16,24,32` times them).
struct PanelPrefetch {
  const char* share = nullptr;
  int64_t lines = 0;
};

// Step `i` of a pass (k = k0 + i).
inline void PrefetchStep(const PanelPrefetch& pf, const unsigned char* panel, int64_t k, int64_t i) {
  if (pf.share == nullptr) {
    const char* ahead = reinterpret_cast<const char*>(panel + (k + kPrefetchSteps) * kPanelStepBytes);
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + kLineBytes, _MM_HINT_T0);
  } else if (i < pf.lines) {
    _mm_prefetch(pf.share + i * kLineBytes, _MM_HINT_T0);
  }
}

// Where a tile's accumulators live between K blocks: contiguous rows of 32 outputs (y's
// rows are `out` floats apart, often a multiple of 4 KiB, which would map every row of
// a tile to the same L1 set).
struct Carry {
  float* data = nullptr;
  bool resume = false;  // start from what data holds (else from zero)
  bool final = true;    // this call ends the K loop: write y (else data)
};

// One R-row tile over steps [k0, k1) of panel j. Accumulators carried between blocks
// are stored and reloaded in f32, so every output still sees its K steps in order, one
// instruction each: the result does not depend on the block size or the row count.
template <typename Step, int R>
inline void Tile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t k0, int64_t k1, const Carry& carry,
                 const PanelPrefetch& prefetch, __mmask16 m0, __mmask16 m1) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = carry.resume ? _mm512_load_ps(carry.data + r * kPanelWidth) : _mm512_setzero_ps();
    acc[r][1] = carry.resume ? _mm512_load_ps(carry.data + r * kPanelWidth + 16) : _mm512_setzero_ps();
  }
  Step::template Run<R>(a.w->panel(j), k0, k1, tile.x, prefetch, acc);
  if (!carry.final) {
    for (int r = 0; r < R; ++r) {
      _mm512_store_ps(carry.data + r * kPanelWidth, acc[r][0]);
      _mm512_store_ps(carry.data + r * kPanelWidth + 16, acc[r][1]);
    }
    return;
  }
  float* y = a.y + tile.first_row * a.y_stride + j * kPanelWidth;
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(y + r * a.y_stride, m0, acc[r][0]);
    _mm512_mask_storeu_ps(y + r * a.y_stride + 16, m1, acc[r][1]);
  }
}

template <typename Step>
inline void RunTile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t k0, int64_t k1, const Carry& carry,
                    const PanelPrefetch& prefetch, __mmask16 m0, __mmask16 m1) {
  switch (tile.rows) {
    case 12: return Tile<Step, 12>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 11: return Tile<Step, 11>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 10: return Tile<Step, 10>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 9: return Tile<Step, 9>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 8: return Tile<Step, 8>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 7: return Tile<Step, 7>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 6: return Tile<Step, 6>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 5: return Tile<Step, 5>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 4: return Tile<Step, 4>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 3: return Tile<Step, 3>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 2: return Tile<Step, 2>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    case 1: return Tile<Step, 1>(a, j, tile, k0, k1, carry, prefetch, m0, m1);
    default: return;  // PlanRowTiles never makes larger tiles
  }
}

template <typename Step>
void RunPanels(const PanelArgs& a, int64_t begin, int64_t end) {
  const int64_t steps = a.w->k_steps();
  const bool blocked = a.num_tiles > 1 && a.rows <= kBlockedRows && a.order == TileOrder::kBlocked;
  alignas(64) float carried[kBlockedRows * kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    const __mmask16 m0 = width >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << width) - 1u);
    const __mmask16 m1 = width >= 32 ? __mmask16(0xffff)
                                     : (width > 16 ? static_cast<__mmask16>((1u << (width - 16)) - 1u) : 0);
    if (!blocked) {
      for (int t = 0; t < a.num_tiles; ++t) RunTile<Step>(a, j, a.tiles[t], 0, steps, Carry{}, {}, m0, m1);
      continue;
    }
    const bool split_prefetch = a.num_tiles == 2;
    for (int64_t k0 = 0; k0 < steps; k0 += kStepBlock) {
      const int64_t k1 = std::min(steps, k0 + kStepBlock);
      // The next block's lines (past the panel's end they are the next panel's first:
      // a prefetch never faults).
      const char* next = reinterpret_cast<const char*>(a.w->panel(j) + (k0 + kStepBlock) * kPanelStepBytes);
      constexpr int64_t kHalfBlockLines = kStepBlock * kPanelStepBytes / kLineBytes / 2;
      for (int t = 0; t < a.num_tiles; ++t) {
        const Carry carry{carried + a.tiles[t].first_row * kPanelWidth, k0 > 0, k1 == steps};
        const PanelPrefetch prefetch =
            split_prefetch ? PanelPrefetch{next + t * kHalfBlockLines * kLineBytes, kHalfBlockLines} : PanelPrefetch{};
        RunTile<Step>(a, j, a.tiles[t], k0, k1, carry, prefetch, m0, m1);
      }
    }
  }
}

}  // namespace crossreg::cpu::internal
