// AMX micro-kernel: bf16 panels through tdpbf16ps, each instruction 16 activation rows x
// 16 outputs x 32 inputs (engine/cpu/linear_kernels.h has the tile layouts). One
// instruction does 8192 multiply-adds where vdpbf16ps does 32, so the rows of a verify
// step cost little more than one row: the forward streams the weights once and the
// tiles keep up with the memory. Compiled with -mamx-tile -mamx-bf16; called only where
// HasAmx() (the process then holds the tile-data permission).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "engine/cpu/amx_tile_config.h"
#include "engine/cpu/linear_kernels.h"

namespace crossreg::cpu::internal {
namespace {

// Tile registers: C for the first row tile's outputs 0-15 and 16-31 (0, 1) and the
// second's (2, 3); A for the two row tiles (4, 5); B for the panel's two halves (6, 7).
// Every tile is 64 bytes a row and 16 rows, but A and C have `rows` rows: a call of one
// row tile multiplies and stores only its rows (a decode step's one row, not 16). A row's
// sums do not depend on the rows beside it in the tile.
AmxTileConfig MakeConfig(int rows) {
  AmxTileConfig c = AmxFullTiles();
  for (int t : {0, 1, 2, 3, 4, 5}) c.rows[t] = static_cast<uint8_t>(rows);
  return c;
}

const AmxTileConfig& ConfigFor(int rows) {
  static const auto configs = [] {
    std::array<AmxTileConfig, kAmxTileRows + 1> all{};
    for (int m = 1; m <= kAmxTileRows; ++m) all[static_cast<size_t>(m)] = MakeConfig(m);
    return all;
  }();
  return configs[static_cast<size_t>(rows)];
}

constexpr int64_t kBlockBytes = kAmxBlockPairs * kPanelStepBytes;  // a K block of a panel: 2 KiB
// The first row tile's pass streams the panel from memory: it asks for the lines this
// far ahead, so they arrive while the tiles work on the blocks before them.
constexpr int64_t kPrefetchAheadBytes = 4 * kBlockBytes;
constexpr int64_t kLineBytes = 64;
constexpr int64_t kXRowBytes = kAmxBlockPairs * sizeof(uint32_t);  // a row's pairs in one K block of a row tile

// One or two row tiles (kTwo) over every K block of one panel, into C tiles 0-1 (2-3).
// `tail`: the panel's last, partial block copied and padded with zero pairs (null when
// K is a whole number of blocks); the activations are zero there already.
template <bool kTwo>
void RowTilesOverPanel(const unsigned char* panel, int64_t full_blocks, const unsigned char* tail, const uint32_t* x0,
                       const uint32_t* x1, bool prefetch) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwo) {
    _tile_zero(2);
    _tile_zero(3);
  }
  auto block = [&](const unsigned char* w, int64_t b) {
    _tile_loadd(6, w, kPanelStepBytes);
    _tile_loadd(7, w + 64, kPanelStepBytes);
    _tile_loadd(4, x0 + b * kAmxBlockPairsPerTile, kXRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwo) {
      _tile_loadd(5, x1 + b * kAmxBlockPairsPerTile, kXRowBytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  };
  for (int64_t b = 0; b < full_blocks; ++b) {
    const unsigned char* w = panel + b * kBlockBytes;
    if (prefetch) {
      // Past the panel's end these are the next panel's lines (a prefetch never faults).
      for (int64_t l = 0; l < kBlockBytes; l += kLineBytes) _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchAheadBytes + l), _MM_HINT_T0);
    }
    block(w, b);
  }
  if (tail != nullptr) block(tail, full_blocks);
}

void StoreRows(const PanelArgs& a, int64_t j, const RowTile& tile, const float* c, int64_t width) {
  float* y = a.y + tile.first_row * a.y_stride + j * kPanelWidth;
  for (int64_t r = 0; r < tile.rows; ++r) std::memcpy(y + r * a.y_stride, c + r * kPanelWidth, sizeof(float) * width);
}

// The C tiles `c0` and `c1` (one row tile's two halves of panel j) into y; a macro, as
// tile intrinsics take literal register numbers. Where the tile's rows and the panel's
// outputs are all real, straight into y's rows (a copy through memory cost prefill 512 of
// the ~110M model a sixth of its time); otherwise through `c`, of which StoreRows copies
// the real ones.
#define CROSSREG_AMX_STORE_C(c0, c1, a, j, tile, rows_read, width, c)                                          \
  do {                                                                                                    \
    if ((width) == kPanelWidth && (tile).rows == (rows_read)) {                                           \
      float* y_ = (a).y + (tile).first_row * (a).y_stride + (j) * kPanelWidth;                            \
      const int64_t stride_ = (a).y_stride * static_cast<int64_t>(sizeof(float));                         \
      _tile_stored(c0, y_, stride_);                                                                      \
      _tile_stored(c1, y_ + 16, stride_);                                                                 \
    } else {                                                                                              \
      _tile_stored(c0, (c), kPanelWidth * sizeof(float));                                                 \
      _tile_stored(c1, (c) + 16, kPanelWidth * sizeof(float));                                            \
      StoreRows(a, j, tile, c, width);                                                                    \
    }                                                                                                     \
  } while (0)

}  // namespace

void PanelsAmxBf16(const PanelArgs& a, int64_t begin, int64_t end) {
  const PackedWeights& w = *a.w;
  const int64_t steps = w.k_steps();
  const int64_t full_blocks = steps / kAmxBlockPairs;
  const int64_t tail_pairs = steps % kAmxBlockPairs;
  const int64_t rows_read = AmxRowsRead(a.tiles[0].rows, static_cast<size_t>(a.num_tiles));
  _tile_loadconfig(&ConfigFor(static_cast<int>(rows_read)));
  alignas(64) unsigned char tail[kBlockBytes];
  alignas(64) float c[2][kAmxTileRows * kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const unsigned char* panel = w.panel(j);
    const int64_t width = std::min<int64_t>(kPanelWidth, w.out() - j * kPanelWidth);
    if (tail_pairs > 0) {
      std::memcpy(tail, panel + full_blocks * kBlockBytes, static_cast<size_t>(tail_pairs * kPanelStepBytes));
      std::memset(tail + tail_pairs * kPanelStepBytes, 0, static_cast<size_t>(kBlockBytes - tail_pairs * kPanelStepBytes));
    }
    const unsigned char* tail_block = tail_pairs > 0 ? tail : nullptr;
    for (int t = 0; t < a.num_tiles; t += 2) {
      const RowTile& t0 = a.tiles[t];
      const auto* x0 = static_cast<const uint32_t*>(t0.x);
      const bool prefetch = t == 0;
      if (t + 1 < a.num_tiles) {
        const RowTile& t1 = a.tiles[t + 1];
        RowTilesOverPanel<true>(panel, full_blocks, tail_block, x0, static_cast<const uint32_t*>(t1.x),
                                prefetch);
        CROSSREG_AMX_STORE_C(0, 1, a, j, t0, rows_read, width, c[0]);
        CROSSREG_AMX_STORE_C(2, 3, a, j, t1, rows_read, width, c[1]);
      } else {
        RowTilesOverPanel<false>(panel, full_blocks, tail_block, x0, nullptr, prefetch);
        CROSSREG_AMX_STORE_C(0, 1, a, j, t0, rows_read, width, c[0]);
      }
    }
  }
  _tile_release();
}

#undef CROSSREG_AMX_STORE_C

}  // namespace crossreg::cpu::internal
