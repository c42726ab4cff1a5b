// The per-ISA micro-kernels behind engine/cpu/linear.h. Each lives in a file compiled
// for its ISA (linear_kernels_<isa>.cc) and is called only when the CPU has it.
//
// Activations arrive in row tiles, transposed: a tile of R rows stores, for each K
// step, the R rows' values side by side (f32 panels: R floats; bf16 panels: R pairs),
// so a micro-kernel walks one pointer per tile and broadcasts at fixed offsets.
//
// Batch invariance, by construction: every output element (row r, output o) is one
// accumulator that sees the K steps of its panel in order, one instruction per step,
// whatever the tile shape, the number of rows or the thread that runs it. So a row's
// result does not depend on which rows share the forward (the greedy identity of
// lossless decoding and AR rests on this).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cpu/packed_weights.h"
#include "engine/cpu/tile_order_chooser.h"

namespace crossreg::cpu::internal {

struct RowTile {
  int64_t first_row = 0;
  int64_t rows = 0;
  // k_steps x rows values: float (kF32 panels), uint32 bf16 pairs (kBf16, vdpbf16ps and
  // portable kernels) or pairs of floats (kBf16, the widened AVX2 and AVX-512 kernels)
  const void* x = nullptr;
};

// Up to this many rows (a verify step) the AVX-512 kernels' tiles, and the kQ8 kernels'
// from AVX2 up, may take turns per K block of a panel (TileOrder::kBlocked, engine/cpu/tile_order_chooser.h); beyond it
// (prefill) each tile runs the whole K, the panel re-read from cache.
inline constexpr int64_t kBlockedRows = 48;

// A call's activations quantized for kQ8 panels, once per call and per row alone (so a
// row's bytes never depend on the rows beside it): per block of 32 inputs a scale
// d = max|x| / 127 and int8 values round(x / d); per 16 inputs the sum of those values
// (as float: exact), which formats with mins subtract. Row-major: q (rows x in),
// scale (rows x in/32), sum16 (rows x in/16).
struct QuantizedRows {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const float* sum16 = nullptr;
  int64_t in = 0;
  // -128 times the code sums per 32 inputs (rows x in/32) and per 16 (rows x in/16), int32:
  // where the VNNI kernel's sums of signed formats start (it feeds it w + 128).
  const int32_t* offset32 = nullptr;
  const int32_t* offset16 = nullptr;
  // For panels of integer sub-block scales (packed_weights.h): the rows quantized again,
  // per block of 256 inputs (a super-block): q256 (rows x in), scale256 (rows x in/256),
  // and the code sums per 16 and per 32 inputs as int16 (rows x in/16, rows x in/32; at
  // most 32 x 127), which the mins multiply. Null when no panel of the call needs them.
  const int8_t* q256 = nullptr;
  const float* scale256 = nullptr;
  const int16_t* isum16 = nullptr;
  const int16_t* isum32 = nullptr;
};

struct PanelArgs {
  const PackedWeights* w = nullptr;
  // kQ8 panels: the rows, quantized; the tiles then only name row ranges.
  const QuantizedRows* qx = nullptr;
  const RowTile* tiles = nullptr;
  int num_tiles = 0;
  int64_t rows = 0;   // all tiles together
  float* y = nullptr; // rows x out, row stride y_stride
  int64_t y_stride = 0;
  // AVX-512 paths, and the kQ8 kernels from AVX2 up (quant_panel_order.h), with 2+ tiles
  // and at most kBlockedRows rows: the loop order (never changes a result bit). The other
  // paths and shapes ignore it.
  TileOrder order = TileOrder::kBlocked;
};

// How a level splits rows into tiles: at most `max` rows per tile; with few tiles they
// are balanced (16 rows: 8 + 8, not 12 + 4).
std::vector<std::pair<int64_t, int64_t>> PlanRowTiles(int64_t rows, int64_t max);

// y[:, 32j, 32j + 32) for panels j in [begin, end), every tile.
void PanelsScalar(const PanelArgs& a, int64_t begin, int64_t end);
// bf16 panels widened to f32 (tiles of WidenBf16Pairs floats), like PanelsAvx512's.
void PanelsAvx2(const PanelArgs& a, int64_t begin, int64_t end);
// bf16 panels: PanelsAvx512 runs the widened kernel (tiles of WidenBf16Pairs floats),
// PanelsAvx512Bf16 vdpbf16ps (tiles of pairs); engine/cpu/bf16_panel_kernel.h chooses.
void PanelsAvx512(const PanelArgs& a, int64_t begin, int64_t end);
void PanelsAvx512Bf16(const PanelArgs& a, int64_t begin, int64_t end);

// bf16 panels on AMX (tdpbf16ps): a tile multiply takes 16 activation rows x 16 pairs
// (tile A) and 16 pairs x 16 outputs (tile B: the kBf16 panel's layout as it is, half a
// panel's 128-byte step a row) into 16 rows x 16 outputs of f32 (tile C). A row tile
// is kAmxTileRows rows in K blocks of kAmxBlockPairs pairs: block after block, each
// block the 16 rows' pairs (1 KiB, what one tile load reads, contiguous so that its rows
// never share an L1 set), zeros past K and in the rows past the tile
// (PackRowTileBf16Amx), so the kernel has no edge cases and a padded row adds nothing.
// Batch invariance: each output is one C tile element that sees its panel's K blocks in
// order, whatever the rows beside it.
inline constexpr int64_t kAmxTileRows = 16;
inline constexpr int64_t kAmxBlockPairs = 16;  // pairs a tile multiply takes from each row
inline constexpr int64_t kAmxBlockPairsPerTile = kAmxTileRows * kAmxBlockPairs;
inline int64_t AmxBlocks(int64_t in) { return ((in + 1) / 2 + kAmxBlockPairs - 1) / kAmxBlockPairs; }
// The pairs of one packed row tile.
inline int64_t AmxTilePairs(int64_t in) { return AmxBlocks(in) * kAmxBlockPairsPerTile; }
// The rows of a row tile the kernel's tiles read: a call of one row tile configures its
// tiles to its own rows (a decode step reads and stores one row, not 16); with more tiles
// every tile reads 16.
inline int64_t AmxRowsRead(int64_t tile_rows, size_t tiles) { return tiles == 1 ? tile_rows : kAmxTileRows; }
// One row tile (rows [first, first + rows) of x, rows <= kAmxTileRows) into `out`
// (AmxTilePairs(in) pairs), rounded as F32ToBf16, and zeros in its rows up to `rows_read`
// (the rows past those are left as they were: no tile reads them). AVX-512 code.
void PackRowTileBf16Amx(const float* x, int64_t in, int64_t first, int64_t rows, int64_t rows_read, uint32_t* out);
// Only where HasAmx() (engine/cpu/cpu_features.h); tiles as above.
void PanelsAmxBf16(const PanelArgs& a, int64_t begin, int64_t end);

// kQ8 panels (engine/cpu/packed_weights.h) with quantized rows: per output, per group
// of S inputs, the exact integer sum of q_w * q_x, then in float
//   acc = fma(float(isum), scale_w * scale_x, acc)
//   acc = fma(-(float(sum_x) * scale_x), min_w, acc)      (formats with mins)
// group after group (the min term's product is the row's, one per group, not one per
// output); for integer sub-block scales, per super-block of 256 with the rows'
// per-256 codes and scale, the exact integer sums isum = sum_j sc_j * (q_w . q_x)_j and
// msum = sum_j m_j * (sum q_x)_j, then
//   acc = fma(float(isum), d_w * scale_x, acc)
//   acc = fma(-float(msum), dmin_w * scale_x, acc)
// or, where the mins are 32 times the scales and dmin = d (Q6_K), the one step
//   acc = fma(float(isum - msum), d_w * scale_x, acc)
// the same operations on every path, so the paths agree bitwise
// (the tests hold them to it) and a row's result never depends on its tile.
void QuantPanelsScalar(const PanelArgs& a, int64_t begin, int64_t end);
void QuantPanelsAvx2(const PanelArgs& a, int64_t begin, int64_t end);
// n super-blocks of a nibble panel (layout l) unpacked into the byte panel's layout
// (quant_panel_order.h RunStagedQuantPanels); AVX2 code, which the VNNI kernel calls too.
void StageNibbleSuperBlocksAvx2(const QuantGroupLayout& l, const unsigned char* src, int64_t n, unsigned char* dst);
// vpdpbusd (AVX-512 VNNI): CPUs that have it run this at the AVX-512 levels.
void QuantPanelsAvx512Vnni(const PanelArgs& a, int64_t begin, int64_t end);
// Rows up to which one kQ8 tile runs at once: the portable kernel and the AVX2 kernel of
// the 32-element formats (16 vector registers), the AVX2 kernel of the super-block
// formats (each row holds two sums: 6 rows take 12 of the 16 registers; over a staged
// panel it runs them as tiles of at most 3 rows over two quarters), the VNNI kernel
// (32), and the most any kernel takes (buffers).
inline constexpr int64_t kQuantTileRows = 4;
inline constexpr int64_t kQuantTileRowsAvx2 = 6;
inline constexpr int64_t kQuantTileRowsVnni = 6;
inline constexpr int64_t kQuantTileRowsMax = std::max({kQuantTileRows, kQuantTileRowsAvx2, kQuantTileRowsVnni});

// What a kQ8 tile asks the memory for while it computes: `lines` cache lines per group,
// from `from` on. In the whole-K order (the K-blocked one: quant_panel_order.h) a panel's
// first tile reads the panel from memory: it streams it, kQuantPrefetchBytes ahead of its
// reads (the hardware prefetchers alone left one row's kernel waiting on DRAM, well
// below the bandwidth roofline; a few KiB ahead gained most of it on the ~110M model,
// and the DRAM-bound ~1.1B model's AVX2 path, whose weights no cache holds, was
// fastest from about 14 KiB on and slower at 6-12 KiB on one host; `crossreg-bench-decode
// --random1b_types q4_k_m --rows 1` times it: docs/benchmarks.md, "Xeon AMX:
// Cross-Regression, quantizing, a ~1.1B model from DRAM"). The requests
// go to L2 (prefetcht1): into L1 they held the line-fill buffers that the loads need, and
// the profile of one row's kernel put two thirds of its time on the prefetch instruction;
// to L2 the ~1.1B model decodes faster (Q4_K_M and Q8_0, AVX2 and VNNI), and a model that
// sits in a large L3 a little slower. The panel's other tiles find it in cache, and between them request
// the next panel, so a verify step's later tiles compute while the memory works instead of
// leaving it idle (a prefetch never faults; past the thread's range or the matrix it runs
// into the next panels of the arena, which the forward reads next). Within a group, one
// row's tile spreads its lines over its steps (PrefetchCursor). Shared by the AVX2 and
// VNNI kernels; defined in portable code.
struct QuantPrefetch {
  const unsigned char* from = nullptr;
  int64_t lines = 0;
};
inline constexpr int64_t kQuantPrefetchBytes = 16384;
QuantPrefetch QuantPrefetchFor(const PanelArgs& a, const unsigned char* panel, int tile);

// Group `group`'s prefetches (its share of a QuantPrefetch) issued a line or two at a
// time over the kernel's first `passes` passes over the group (its steps, or pairs of
// steps), evenly; or all at once at the group's start for passes = 0. Issued at once, one
// row's lines fill the core's queue of memory requests and the arithmetic behind them
// waits on it: one row of the ~1.1B models, whose weights no cache holds, ran its
// arithmetic and its waits on memory one after the other (docs/benchmarks.md, "Xeon AMX:
// Cross-Regression, quantizing, a ~1.1B model from DRAM"). A pass is an add and a
// compare (a Bresenham step). The
// 32-element kernels' tiles of several rows, bound by their arithmetic, take the burst:
// prefetch arithmetic in every step cost the ~110M Q8_0 model's 16-row forwards and
// prefills on AVX2 6-18%; the super-block kernels' tiles spread theirs at every row count,
// where their 16-row forwards read the same either way.
class PrefetchCursor {
 public:
  PrefetchCursor(const QuantPrefetch& p, int64_t group, int64_t passes)
      : next_(p.from + group * p.lines * 64),
        end_(next_ + p.lines * 64),
        lines_(passes > 0 ? p.lines : 0),
        passes_(passes > 0 ? passes : 1) {
    if (passes > 0) return;
    for (int64_t l = 0; l < p.lines; ++l, next_ += 64) __builtin_prefetch(next_, 0, 2);
  }
  void Pass() {
    for (credit_ += lines_; credit_ >= passes_ && next_ < end_; credit_ -= passes_, next_ += 64) {
      __builtin_prefetch(next_, 0, 2);  // prefetcht1: into L2
    }
  }

 private:
  const unsigned char* next_;
  const unsigned char* end_;
  int64_t lines_, passes_, credit_ = 0;
};

// x (rows x in, f32) into QuantizedRows' arrays (in a multiple of 32). The paths give
// the same bytes: d = amax / 127, q = nearest-even(x * (1 / d)).
void QuantizeRowsScalar(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, float* sum16);
void QuantizeRowsAvx2(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, float* sum16);
// The same per block of 256 (in a multiple of 256): d = amax / 127 over the block, and
// the code sums per 16 and per 32 as int16 (QuantizedRows::q256 and the rest).
void QuantizeRows256Scalar(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, int16_t* sum16,
                           int16_t* sum32);
void QuantizeRows256Avx2(const float* x, int64_t rows, int64_t in, int8_t* q, float* scale, int16_t* sum16,
                         int16_t* sum32);

// Row tiles of x (rows x in, f32, row stride in) into `out`, transposed as above:
// f32 values, or bf16 pairs rounded to nearest even (K padded with zeros to whole pairs;
// identical bits on every path). Tiles follow each other in `out`; the f32 packer returns
// each tile's start (in elements of 4 bytes).
std::vector<int64_t> PackRowTilesF32(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                                     float* out);
// The bf16 packer comes in two halves, so that prefill can pack its many tiles on every
// core: each tile's start, then tiles [begin, end) packed at those starts (tiles are
// independent).
std::vector<int64_t> RowTileStartsBf16(int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles);
void PackRowTilesBf16Range(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                           const std::vector<int64_t>& starts, uint32_t* out, bool avx512, int64_t begin, int64_t end);
// The widened bf16 kernel's activations (Bf16WideStep): each packed pair as two f32,
// the even value then the odd one, exactly (a bf16 is the top half of its f32). Pairs
// [begin, end) of `pairs` into floats [2 begin, 2 end) of `out`: tile starts double.
void WidenBf16Pairs(const uint32_t* pairs, int64_t begin, int64_t end, float* out);
// AVX2: tiles [begin, end) rounded straight into WidenBf16Pairs' layout (a tile's floats
// from twice its start in `starts`), eight values a vector: the bits of packing and then
// widening, without the pairs in between. A verify step's tiles are packed on one core
// while the other waits, so this runs in the forward's serial part.
void PackRowTilesWideAvx2(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                          const std::vector<int64_t>& starts, float* out, int64_t begin, int64_t end);

}  // namespace crossreg::cpu::internal
