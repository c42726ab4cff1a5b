// AVX2 + FMA micro-kernels (8 lanes, 16 vector registers) for f32 and bf16 panels.
// Compiled with -mavx2 -mfma; called only after run-time detection.
//
// One row (batch-1 decode) streams the weights: a tile runs the whole panel, 32 outputs
// in 4 accumulators, K in order, asking for the weights kPrefetchBytes ahead. Without
// the requests the kernel leans on the hardware prefetchers, which a verify step's
// repeated reads of cached panels leave throttled: a one-row forward of the default
// model ran up to 2-3x slower for the first forwards after a 16-34 row one, so the
// adaptive draft length's cost curve, which times each size right after the largest,
// read one row as dearer than eight.
//
// Tiles of 2 and 3 rows run the whole panel (PanelTile: enough independent sums to hide the
// FMA latency). Tiles of 4 to 6 rows (linear.cc MaxRowTile) run half a panel (16 outputs:
// the step's first or second 64-byte line): 2 accumulators per row, the half's weights
// converted once per step for every row of the tile (bf16: even and odd values, 4
// registers), the activations arriving as f32 (bf16 tiles widened once per call,
// WidenBf16Pairs), so each row costs its broadcasts and FMAs only. A 5-row tile keeps
// 10 accumulators, 2 live weights, the mask and a broadcast in 14 of the 16 registers (a
// 5-row default-model forward costs markedly less than as 3 + 2). A 6-row
// tile's 12 sums leave no register for the mask, so its AND reads the mask from memory
// (HighHalves; GCC otherwise keeps the constant in a register and spills, and clearing
// the low halves with two shifts put the conversions on the FMA ports: 6 rows then cost
// 1.34x 5 rows' time). Every tile converts every step again, so one 6-row tile beats
// 3 + 3 (`crossreg-bench-decode --rows 1,5,6,12,16` with CROSSREG_SIMD=avx2 times the
// default model's forwards); staging a K block's weights as f32 once for all the
// tiles of a call cost more in stores than the conversions it saved. A 4-row tile
// issues 16 FMAs per step for 4 conversions where a 2-row tile over the whole panel
// issued 16 for 12. Verify-sized calls take a K block (64 steps, 8 KiB) at a time through every
// tile and both halves while it sits in L1, so the weights stream from memory once
// (accumulators carried in f32 between blocks: results do not depend on the blocking).
//
// Every output is one accumulator that sees its K steps in order (bf16: the even
// product, then the odd one), as in the portable kernel: the paths agree bitwise and a
// row's result never depends on its tile.
#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/linear_kernels.h"
#include "engine/dtype.h"

namespace crossreg::cpu::internal {
namespace {

constexpr int64_t kStepBytes = kPanelStepBytes;  // f32 and bf16 panels: 32 outputs x 4 bytes
constexpr int64_t kLine = 64;
// Batch-1 decode: how far ahead of its reads a one-row tile asks for the weights.
constexpr int64_t kPrefetchBytes = 2048;
// Verify-sized calls (up to kBlockedRows rows): K steps per block, 8 KiB of weights that
// stay in L1 while every tile and half runs over them. Beyond (prefill) each tile runs
// the whole K of its half, the panel re-read from L2.
constexpr int64_t kStepBlock = 64;

inline void Store(float* y, const __m256* acc, int64_t width) {
  if (width >= 8 * 4) {
    for (int q = 0; q < 4; ++q) _mm256_storeu_ps(y + 8 * q, acc[q]);
    return;
  }
  alignas(32) float tmp[32];
  for (int q = 0; q < 4; ++q) _mm256_store_ps(tmp + 8 * q, acc[q]);
  std::copy_n(tmp, width, y);
}

// One row over the whole panel j (32 outputs), streaming it.
template <bool kBf16>
void RowTile1(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t width) {
  __m256 acc[4];
  for (int q = 0; q < 4; ++q) acc[q] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const unsigned char* p = a.w->panel(j);
  const auto* x = static_cast<const float*>(tile.x);
  const int64_t steps = a.w->k_steps();
  for (int64_t k = 0; k < steps; ++k) {
    const char* ahead = reinterpret_cast<const char*>(p + k * kStepBytes + kPrefetchBytes);
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + kLine, _MM_HINT_T0);
    if constexpr (kBf16) {
      const __m256 xe = _mm256_broadcast_ss(x + 2 * k);
      const __m256 xo = _mm256_broadcast_ss(x + 2 * k + 1);
      for (int q = 0; q < 4; ++q) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + k * kStepBytes + 32 * q));
        acc[q] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), xe, acc[q]);
        acc[q] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, high)), xo, acc[q]);
      }
    } else {
      const __m256 xb = _mm256_broadcast_ss(x + k);
      const auto* w = reinterpret_cast<const float*>(p + k * kStepBytes);
      for (int q = 0; q < 4; ++q) acc[q] = _mm256_fmadd_ps(_mm256_load_ps(w + 8 * q), xb, acc[q]);
    }
  }
  Store(a.y + tile.first_row * a.y_stride + j * kPanelWidth, acc, width);
}

// Where a half tile's accumulators start and end up (see the AVX-512 kernels' Carry).
struct HalfCarry {
  float* data = nullptr;  // R rows x 16 floats, row stride 32 (null: whole K, no carry)
  bool resume = false;    // start from data (else zero)
  bool final = true;      // write y (else data)
};

// What one pass over a K block asks for: `lines` cache lines from `from` on, one per
// step from its first step (two per step where the pass is shorter than that).
struct PassPrefetch {
  const char* from = nullptr;
  int64_t lines = 0;
};

inline void PrefetchAt(const PassPrefetch& pf, int64_t i, int64_t pass_steps) {
  if (i < pf.lines) _mm_prefetch(pf.from + i * kLine, _MM_HINT_T0);
  if (i + pass_steps < pf.lines) _mm_prefetch(pf.from + (i + pass_steps) * kLine, _MM_HINT_T0);
}

// v's high 16 bits of every lane, the mask read from memory by the AND itself: GCC keeps
// a constant in a register, which a 6-row tile does not have.
alignas(32) constexpr uint32_t kHighMask[8] = {0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u,
                                               0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u};
inline __m256i HighHalves(__m256i v) {
  __m256i out;
  asm("vpand %1, %2, %0" : "=x"(out) : "m"(kHighMask), "x"(v));
  return out;
}

// R rows over steps [k0, k1) of half `h` of a panel.
template <int R, bool kBf16>
void HalfTile(const PanelArgs& a, int64_t j, const RowTile& tile, int h, int64_t k0, int64_t k1,
              const HalfCarry& carry, PassPrefetch prefetch, int64_t width) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < 2; ++q) {
      acc[r][q] = carry.resume ? _mm256_load_ps(carry.data + r * kPanelWidth + 8 * q) : _mm256_setzero_ps();
    }
  }
  const unsigned char* p = a.w->panel(j) + h * kLine;
  if constexpr (kBf16) {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    const float* x = static_cast<const float*>(tile.x) + k0 * 2 * R;
    for (int64_t k = k0; k < k1; ++k, x += 2 * R) {
      PrefetchAt(prefetch, k - k0, k1 - k0);
      const auto* w = reinterpret_cast<const __m256i*>(p + k * kStepBytes);
      // Every row's even products, then every row's odd ones (each accumulator still
      // sees even before odd): only two converted weights are live at a time, so 8
      // accumulators, the mask and a broadcast fit the 16 registers without spills.
      const __m256 w0e = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_load_si256(w), 16));
      const __m256 w1e = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_load_si256(w + 1), 16));
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 xe = _mm256_broadcast_ss(x + 2 * r);
        acc[r][0] = _mm256_fmadd_ps(w0e, xe, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(w1e, xe, acc[r][1]);
      }
      // Six rows hold 12 sums: no register is left for the mask, which the AND reads
      // from memory.
      const __m256 w0o = _mm256_castsi256_ps(R == 6 ? HighHalves(_mm256_load_si256(w))
                                                    : _mm256_and_si256(_mm256_load_si256(w), high));
      const __m256 w1o = _mm256_castsi256_ps(R == 6 ? HighHalves(_mm256_load_si256(w + 1))
                                                    : _mm256_and_si256(_mm256_load_si256(w + 1), high));
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 xo = _mm256_broadcast_ss(x + 2 * r + 1);
        acc[r][0] = _mm256_fmadd_ps(w0o, xo, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(w1o, xo, acc[r][1]);
      }
    }
  } else {
    const float* x = static_cast<const float*>(tile.x) + k0 * R;
    for (int64_t k = k0; k < k1; ++k, x += R) {
      PrefetchAt(prefetch, k - k0, k1 - k0);
      const auto* w = reinterpret_cast<const float*>(p + k * kStepBytes);
      const __m256 w0 = _mm256_load_ps(w);
      const __m256 w1 = _mm256_load_ps(w + 8);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 xb = _mm256_broadcast_ss(x + r);
        acc[r][0] = _mm256_fmadd_ps(w0, xb, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(w1, xb, acc[r][1]);
      }
    }
  }
  if (!carry.final) {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      _mm256_store_ps(carry.data + r * kPanelWidth, acc[r][0]);
      _mm256_store_ps(carry.data + r * kPanelWidth + 8, acc[r][1]);
    }
    return;
  }
  // A narrow last panel: masked stores. Every loop over the rows is unrolled: one that
  // indexes acc at run time makes GCC keep a copy of every accumulator on the stack,
  // stored at every K step.
  const int64_t half_width = std::min<int64_t>(16, width - 16 * h);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(half_width)), lane);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(half_width - 8)), lane);
  float* y = a.y + tile.first_row * a.y_stride + j * kPanelWidth + 16 * h;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_maskstore_ps(y + r * a.y_stride, m0, acc[r][0]);
    _mm256_maskstore_ps(y + r * a.y_stride + 8, m1, acc[r][1]);
  }
}

// Two or three rows over steps [k0, k1) of the whole panel (32 outputs). Every output's
// products form one chain of dependent FMAs (its order is the contract), so a tile needs
// about 8 independent accumulators to keep both FMA pipes busy (4-cycle latency): 2 rows
// over half a panel hold 4 and 3 rows 6, and wait on latency (a forward of the default
// model cost 1.6x one row at 2 rows and 1.8x at 3, on 2 cores). Over the whole panel they
// hold 8 or 12. Three rows take all 16 registers (12 sums, a weight, 3 broadcasts), so their
// odd weights are masked by an AND that reads the mask from memory (HighHalves; two shifts
// in its place cost the default model's 3-row forward ~5% more). `carry` as
// HalfTile's for h = 0, both halves.
template <int R, bool kBf16>
void PanelTile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t k0, int64_t k1, const HalfCarry& carry,
               PassPrefetch prefetch, int64_t width) {
  static_assert(R == 2 || R == 3);
  __m256 acc[R][4];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      acc[r][q] = carry.resume ? _mm256_load_ps(carry.data + r * kPanelWidth + 8 * q) : _mm256_setzero_ps();
    }
  }
  const unsigned char* p = a.w->panel(j);
  if constexpr (kBf16) {
    const float* x = static_cast<const float*>(tile.x) + k0 * 2 * R;
    for (int64_t k = k0; k < k1; ++k, x += 2 * R) {
      PrefetchAt(prefetch, k - k0, k1 - k0);
      const auto* w = reinterpret_cast<const __m256i*>(p + k * kStepBytes);
      // Each output sees its even product, then its odd one: all the even ones first.
      __m256 xb[R];
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) xb[r] = _mm256_broadcast_ss(x + 2 * r);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_load_si256(w + q), 16));
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(we, xb[r], acc[r][q]);
      }
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) xb[r] = _mm256_broadcast_ss(x + 2 * r + 1);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i wq = _mm256_load_si256(w + q);
        const __m256 wo = _mm256_castsi256_ps(
            R == 2 ? _mm256_and_si256(wq, _mm256_set1_epi32(static_cast<int>(0xffff0000u))) : HighHalves(wq));
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(wo, xb[r], acc[r][q]);
      }
    }
  } else {
    const float* x = static_cast<const float*>(tile.x) + k0 * R;
    for (int64_t k = k0; k < k1; ++k, x += R) {
      PrefetchAt(prefetch, k - k0, k1 - k0);
      const auto* w = reinterpret_cast<const float*>(p + k * kStepBytes);
      __m256 xb[R];
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) xb[r] = _mm256_broadcast_ss(x + r);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256 wq = _mm256_load_ps(w + 8 * q);
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(wq, xb[r], acc[r][q]);
      }
    }
  }
  if (!carry.final) {
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) _mm256_store_ps(carry.data + r * kPanelWidth + 8 * q, acc[r][q]);
    }
    return;
  }
  float* y = a.y + tile.first_row * a.y_stride + j * kPanelWidth;
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) Store(y + r * a.y_stride, acc[r], width);
}

// The whole-panel tiles' row counts (PanelTile); other tiles run by halves.
inline bool WholePanelTile(int64_t rows) { return rows == 2 || rows == 3; }

template <bool kBf16>
void RunPanelTile(const PanelArgs& a, int64_t j, const RowTile& tile, int64_t k0, int64_t k1, const HalfCarry& carry,
                  PassPrefetch prefetch, int64_t width) {
  if (tile.rows == 2) return PanelTile<2, kBf16>(a, j, tile, k0, k1, carry, prefetch, width);
  PanelTile<3, kBf16>(a, j, tile, k0, k1, carry, prefetch, width);
}

template <bool kBf16>
void RunHalfTile(const PanelArgs& a, int64_t j, const RowTile& tile, int h, int64_t k0, int64_t k1,
                 const HalfCarry& carry, PassPrefetch prefetch, int64_t width) {
  switch (tile.rows) {
    case 6: return HalfTile<6, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    case 5: return HalfTile<5, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    case 4: return HalfTile<4, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    case 3: return HalfTile<3, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    case 2: return HalfTile<2, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    case 1: return HalfTile<1, kBf16>(a, j, tile, h, k0, k1, carry, prefetch, width);
    default: return;  // PlanRowTiles never makes larger tiles at this level
  }
}

template <bool kBf16>
void Panels(const PanelArgs& a, int64_t begin, int64_t end) {
  const int64_t steps = a.w->k_steps();
  if (a.num_tiles == 1 && a.tiles[0].rows == 1) {
    for (int64_t j = begin; j < end; ++j) {
      RowTile1<kBf16>(a, j, a.tiles[0], std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth));
    }
    return;
  }
  const bool blocked = a.rows <= kBlockedRows;
  alignas(32) float carried[kBlockedRows * kPanelWidth];
  for (int64_t j = begin; j < end; ++j) {
    const int64_t width = std::min<int64_t>(kPanelWidth, a.w->out() - j * kPanelWidth);
    const int halves = width > 16 ? 2 : 1;
    if (!blocked) {
      for (int t = 0; t < a.num_tiles; ++t) {
        if (WholePanelTile(a.tiles[t].rows)) {
          RunPanelTile<kBf16>(a, j, a.tiles[t], 0, steps, {}, {}, width);
          continue;
        }
        for (int h = 0; h < halves; ++h) RunHalfTile<kBf16>(a, j, a.tiles[t], h, 0, steps, {}, {}, width);
      }
      continue;
    }
    for (int64_t k0 = 0; k0 < steps; k0 += kStepBlock) {
      const int64_t k1 = std::min(steps, k0 + kStepBlock);
      // The passes over a block ask for the next block's lines between them, a share
      // each, so the requests keep pace with the memory through the block (asked for
      // all at once, they queue behind the core's few line-fill buffers and stall the
      // first pass). Past the panel's end they are the next panel's first lines: a
      // prefetch never faults.
      const char* next = reinterpret_cast<const char*>(a.w->panel(j) + k1 * kStepBytes);
      const int64_t passes = int64_t{halves} * a.num_tiles;
      const int64_t share = (kStepBlock * kStepBytes / kLine + passes - 1) / passes;
      int64_t pass = 0;
      for (int h = 0; h < halves; ++h) {
        for (int t = 0; t < a.num_tiles; ++t, ++pass) {
          const RowTile& tile = a.tiles[t];
          const HalfCarry carry{carried + tile.first_row * kPanelWidth + 16 * h, k0 > 0, k1 == steps};
          if (WholePanelTile(tile.rows)) {
            // The whole panel in the first half's pass, asking for both passes' shares.
            if (h == 0) RunPanelTile<kBf16>(a, j, tile, k0, k1, carry, {next + pass * share * kLine, share * halves}, width);
            continue;
          }
          RunHalfTile<kBf16>(a, j, tile, h, k0, k1, carry, {next + pass * share * kLine, share}, width);
        }
      }
    }
  }
}

}  // namespace

namespace {

// F32ToBf16 (nearest even; a NaN keeps its sign and top bits, made quiet) in 8 lanes,
// as the f32 whose top half it is.
inline __m256i RoundToBf16(__m256i bits) {
  const __m256i top = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_and_si256(_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), top);
  const __m256i quiet = _mm256_or_si256(_mm256_and_si256(bits, top), _mm256_set1_epi32(0x00400000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

}  // namespace

void PackRowTilesWideAvx2(const float* x, int64_t in, const std::vector<std::pair<int64_t, int64_t>>& tiles,
                          const std::vector<int64_t>& starts, float* out, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const auto [first, rows] = tiles[static_cast<size_t>(t)];
    // Pair p of row r sits at floats 2 (p rows + r) of the tile: a row's values go out
    // two at a time, rows * 2 floats apart.
    const int64_t stride = 2 * rows;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + (first + r) * in;
      float* o = out + 2 * starts[static_cast<size_t>(t)] + 2 * r;
      int64_t i = 0;
      for (; i + 8 <= in; i += 8) {
        const __m256i v = RoundToBf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + i)));
        const __m128 lo = _mm_castsi128_ps(_mm256_castsi256_si128(v));
        const __m128 hi = _mm_castsi128_ps(_mm256_extracti128_si256(v, 1));
        float* at = o + (i / 2) * stride;
        _mm_storel_pi(reinterpret_cast<__m64*>(at), lo);
        _mm_storeh_pi(reinterpret_cast<__m64*>(at + stride), lo);
        _mm_storel_pi(reinterpret_cast<__m64*>(at + 2 * stride), hi);
        _mm_storeh_pi(reinterpret_cast<__m64*>(at + 3 * stride), hi);
      }
      for (; i < in; ++i) o[(i / 2) * stride + (i & 1)] = Bf16ToF32(F32ToBf16(xr[i]));
      if (in % 2 != 0) o[(in / 2) * stride + 1] = 0.0f;  // K padded to whole pairs
    }
  }
}

void PanelsAvx2(const PanelArgs& a, int64_t begin, int64_t end) {
  if (a.w->format() == PanelFormat::kF32) {
    Panels<false>(a, begin, end);
  } else {
    Panels<true>(a, begin, end);
  }
}

}  // namespace crossreg::cpu::internal
