// The AMX peak loops (engine/cpu/compute_peak.h), compiled for AMX: four C tiles
// accumulating products of two A and two B tiles loaded once, so the loop is the tile
// multiplier alone. Call only where HasAmx().
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "engine/cpu/amx_tile_config.h"
#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {
namespace {

// Four C tiles (0-3) accumulating products of A tiles 4-5 and B tiles 6-7, each loaded
// once from 1 KiB of small values (bf16 1.0 and 2^-11, or int8 1 and 2: no overflow, no
// denormals, nothing the multiplier could skip); `dot` issues the four multiplies.
template <typename T, typename Dot>
void TileLoop(int64_t iterations, T x, T y, Dot dot) {
  static_assert(1024 % sizeof(T) == 0, "one tile: 16 rows x 64 bytes");
  alignas(64) T a[1024 / sizeof(T)], b[1024 / sizeof(T)];
  for (size_t i = 0; i < 1024 / sizeof(T); ++i) {
    a[i] = (i % 3 == 0) ? x : y;
    b[i] = (i % 3 == 0) ? y : x;
  }
  const AmxTileConfig config = AmxFullTiles();
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, a, 64);
  for (int64_t it = 0; it < iterations; ++it) dot();
  alignas(64) float c[256];
  _tile_stored(0, c, 64);
  _tile_release();
  PeakSink() = c[0];
}

}  // namespace

double DotBf16LoopAmx(int64_t iterations) {
  TileLoop(iterations, uint16_t{0x3f80}, uint16_t{0x3a00}, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
  return static_cast<double>(iterations) * 4 * (16 * 16 * 32) * 2;
}

double DotInt8LoopAmx(int64_t iterations) {
  TileLoop(iterations, int8_t{1}, int8_t{2}, [] {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  });
  return static_cast<double>(iterations) * 4 * (16 * 16 * 64) * 2;
}

}  // namespace crossreg::cpu::internal
