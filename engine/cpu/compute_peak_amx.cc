// The AMX peak loops (engine/cpu/compute_peak.h), compiled for AMX: four C tiles
// accumulating products of two A and two B tiles loaded once, so the loop is the tile
// multiplier alone. Call only where HasAmx().
#include <immintrin.h>

#include <cstdint>

#include "engine/cpu/compute_peak.h"

namespace crossreg::cpu::internal {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void LoadFullTiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  _tile_loadconfig(&c);
}

// 16 rows x 64 bytes of small values (bf16 1.0 and 2^-11, or int8 1 and 2): no
// overflow, no denormals, nothing the multiplier could skip.
template <typename T, size_t N>
void FillTileSource(T (&a)[N], T x, T y) {
  static_assert(sizeof(a) == 1024, "one tile: 16 rows x 64 bytes");
  for (size_t i = 0; i < N; ++i) a[i] = (i % 3 == 0) ? x : y;
}

}  // namespace

double DotBf16LoopAmx(int64_t iterations) {
  alignas(64) uint16_t a[512], b[512];
  FillTileSource(a, uint16_t{0x3f80}, uint16_t{0x3a00});
  FillTileSource(b, uint16_t{0x3a00}, uint16_t{0x3f80});
  LoadFullTiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, a, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[256];
  _tile_stored(0, c, 64);
  _tile_release();
  PeakSink() = c[0];
  return static_cast<double>(iterations) * 4 * (16 * 16 * 32) * 2;
}

double DotInt8LoopAmx(int64_t iterations) {
  alignas(64) int8_t a[1024], b[1024];
  FillTileSource(a, int8_t{1}, int8_t{2});
  FillTileSource(b, int8_t{2}, int8_t{1});
  LoadFullTiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, a, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) int32_t c[256];
  _tile_stored(0, c, 64);
  _tile_release();
  PeakSink() = static_cast<float>(c[0]);
  return static_cast<double>(iterations) * 4 * (16 * 16 * 64) * 2;
}

}  // namespace crossreg::cpu::internal
