// The 64-byte tile configuration AMX's ldtilecfg reads (palette 1): per tile register its
// row count and bytes a row. Shared by the AMX files (*_amx.cc); plain data, no intrinsics.
#pragma once

#include <cstdint>

namespace crossreg::cpu::internal {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes a row, per tile
  uint8_t rows[16] = {};
};

// Tiles 0-7 of 16 rows x 64 bytes, the largest.
inline AmxTileConfig AmxFullTiles() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

}  // namespace crossreg::cpu::internal
