// The two loop orders of the kQ8 kernels over a call's panels (engine/cpu/linear_kernels.h),
// shared by the AVX2 and VNNI kernels, which supply the tile.
//
// Whole-K: each row tile runs a panel's whole K in turn. The first tile streams the panel
// from memory and the others find it in cache (QuantPrefetchFor); while the first tile
// waits on memory, nothing else computes.
//
// K-blocked (verify-sized calls, TileOrder::kBlocked): the tiles take turns per block of
// kQuantBlockBytes of a panel's groups, and while they compute on one block from L1 each
// requests a share of the next. The weights then stream under every tile's arithmetic,
// not only the first's, so a 16-row forward's memory and math overlap. The tiles' f32
// sums wait in a buffer between blocks; each output still adds its groups in order with
// the same operations, so the order never changes a bit (tests/unit/quantized_linear_test.cc).
// Which order is faster depends on the core (a 32 KiB L1 holds less of the panel than a
// 48 KiB one), so engine/cpu/tile_order_chooser.h times both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/cpu/linear_kernels.h"

namespace crossreg::cpu::internal {

// Weight bytes per K block: the block and the next one's prefetched lines fit in L1 beside
// the activations.
inline constexpr int64_t kQuantBlockBytes = 8192;

inline bool QuantBlocked(const PanelArgs& a) {
  return a.num_tiles > 1 && a.rows <= kBlockedRows && a.order == TileOrder::kBlocked;
}

// tile(std::integral_constant<int, R>{}) for R = rows (1 <= rows <= kMax): the kernels'
// tiles take their row count as a template argument, so each SIMD file maps a tile's
// rows to its instances through this one place.
template <int kMax, typename Tile>
void WithTileRows(int rows, const Tile& tile) {
  static_assert(kMax >= 1);
  if constexpr (kMax == 1) {
    tile(std::integral_constant<int, 1>{});
  } else if (rows >= kMax) {
    tile(std::integral_constant<int, kMax>{});
  } else {
    WithTileRows<kMax - 1>(rows, tile);
  }
}

inline int64_t QuantBlockGroups(const PackedWeights& w) {
  return std::max<int64_t>(1, kQuantBlockBytes / w.quant().group_bytes());
}

// Tile `tile`'s share of the block after groups [g0, g1) of `panel`, spread over its
// g1 - g0 groups (past the panel's end the next panel's first lines: a prefetch never faults).
// The divisions are done once per call: three 64-bit divisions per tile and block were a
// fifth of the staged loop's own samples in a 16-row Q4_K forward (K = 768 is three blocks
// of one group there).
class QuantBlockPrefetches {
 public:
  explicit QuantBlockPrefetches(const PanelArgs& a)
      : group_bytes_(a.w->quant().group_bytes()),
        block_(QuantBlockGroups(*a.w)),
        share_(((block_ * group_bytes_ + 63) / 64 + a.num_tiles - 1) / a.num_tiles),
        per_group_((share_ + block_ - 1) / block_) {}

  QuantPrefetch For(const unsigned char* panel, int64_t g0, int64_t g1, int tile) const {
    const int64_t n = g1 - g0;
    return {panel + g1 * group_bytes_ + tile * share_ * 64, n == block_ ? per_group_ : (share_ + n - 1) / n};
  }

 private:
  int64_t group_bytes_, block_, share_, per_group_;
};

// A row's sums of one panel into y: a whole panel's as a copy of constant size, which the
// compiler inlines (a library call per row and panel is a few percent of a prefill).
inline void StorePanelRow(const float* sums, int64_t width, float* y) {
  if (width == kPanelWidth) {
    std::copy_n(sums, kPanelWidth, y);
  } else {
    std::copy_n(sums, width, y);
  }
}

// run_tile(groups, tile, g0, g1, carry_in, prefetch, out): the tile's rows over a panel's
// groups [g0, g1), of which `groups` points at g0; each row's 32 sums in out[r], which hold
// the sums so far when carry_in (else the tile starts from zero), and the prefetch's lines
// requested group by group from g0 on.
template <typename RunTile>
void RunQuantPanels(const PanelArgs& a, int64_t begin, int64_t end, RunTile run_tile) {
  const int64_t groups = a.w->k_steps();
  const bool blocked = QuantBlocked(a);
  const int64_t block = QuantBlockGroups(*a.w);
  const int64_t group_bytes = a.w->quant().group_bytes();
  const QuantBlockPrefetches prefetches(a);
  alignas(64) float acc[kQuantTileRowsMax][kPanelWidth];
  alignas(64) float carried[kBlockedRows][kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    const unsigned char* panel = a.w->panel(j);
    float* const y = a.y + j * kPanelWidth;
    if (!blocked) {
      for (int t = 0; t < a.num_tiles; ++t) {
        const RowTile& tile = a.tiles[t];
        run_tile(panel, tile, 0, groups, false, QuantPrefetchFor(a, panel, t), acc);
        for (int64_t r = 0; r < tile.rows; ++r) StorePanelRow(acc[r], width, y + (tile.first_row + r) * a.y_stride);
      }
      continue;
    }
    for (int64_t g0 = 0; g0 < groups; g0 += block) {
      const int64_t g1 = std::min(groups, g0 + block);
      for (int t = 0; t < a.num_tiles; ++t) {
        const RowTile& tile = a.tiles[t];
        run_tile(panel + g0 * group_bytes, tile, g0, g1, g0 > 0, prefetches.For(panel, g0, g1, t),
                 carried + tile.first_row);
      }
    }
    for (int64_t r = 0; r < a.rows; ++r) StorePanelRow(carried[r], width, y + r * a.y_stride);
  }
}

// RunQuantPanels for calls of 2+ row tiles over panels whose codes need unpacking (nibbles,
// high bits): each panel (whole-K) or block (K-blocked) is unpacked once into a byte
// panel (StageNibbleSuperBlocksAvx2, QuantGroupLayout::unpacked), and every tile runs the
// byte-panel kernel over that copy, which is in L1 or L2. Unpacked in each
// tile, a 16-row call of the AVX2 kernel split and joined each code 4 times, and the
// shifts and masks share its multiply ports (Q6_K's 16-row forward 16% slower than from a
// byte panel; staged, within a few percent of it). The stage streams the panel from memory; the
// tiles request the next panel's lines between them, as the whole-K order's later tiles do.
// The results are the byte kernel's, which are the unpacking kernel's, bit for bit.
template <typename RunTile>
void RunStagedQuantPanels(const PanelArgs& a, int64_t begin, int64_t end, RunTile run_tile) {
  const QuantGroupLayout& layout = a.w->quant();
  const int64_t groups = a.w->k_steps();
  const int64_t group_bytes = layout.group_bytes();
  const int64_t staged_group_bytes = layout.unpacked().group_bytes();
  const bool blocked = QuantBlocked(a);
  const int64_t block = blocked ? QuantBlockGroups(*a.w) : groups;
  thread_local std::vector<unsigned char> staged;
  if (staged.size() < static_cast<size_t>(block * staged_group_bytes)) {
    staged.resize(static_cast<size_t>(block * staged_group_bytes));
  }
  const QuantBlockPrefetches prefetches(a);
  alignas(64) float acc[kQuantTileRowsMax][kPanelWidth];
  alignas(64) float carried[kBlockedRows][kPanelWidth];
  const int64_t panel_lines = a.w->panel_bytes() / 64;
  const int64_t share = (panel_lines + a.num_tiles - 1) / a.num_tiles;  // the next panel's lines per tile
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    const unsigned char* panel = a.w->panel(j);
    float* const y = a.y + j * kPanelWidth;
    if (!blocked) {
      StageNibbleSuperBlocksAvx2(layout, panel, groups, staged.data());
      for (int t = 0; t < a.num_tiles; ++t) {
        const RowTile& tile = a.tiles[t];
        const QuantPrefetch next{panel + a.w->panel_bytes() + t * share * 64, (share + groups - 1) / groups};
        run_tile(staged.data(), tile, 0, groups, false, next, acc);
        for (int64_t r = 0; r < tile.rows; ++r) StorePanelRow(acc[r], width, y + (tile.first_row + r) * a.y_stride);
      }
      continue;
    }
    for (int64_t g0 = 0; g0 < groups; g0 += block) {
      const int64_t g1 = std::min(groups, g0 + block);
      StageNibbleSuperBlocksAvx2(layout, panel + g0 * group_bytes, g1 - g0, staged.data());
      for (int t = 0; t < a.num_tiles; ++t) {
        const RowTile& tile = a.tiles[t];
        run_tile(staged.data(), tile, g0, g1, g0 > 0, prefetches.For(panel, g0, g1, t), carried + tile.first_row);
      }
    }
    for (int64_t r = 0; r < a.rows; ++r) StorePanelRow(carried[r], width, y + r * a.y_stride);
  }
}

}  // namespace crossreg::cpu::internal
