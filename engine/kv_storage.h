// Sizing the K/V storage a backend allocates for a PagedKvCache: one definition for
// every backend, so a memory budget means the same number of tokens on CPU and GPU.
#pragma once

#include <cstdint>

#include "engine/model/model_config.h"

namespace crossreg {

// Bytes one cached token takes: every layer's K and V rows, f32 elements (the element
// type both backends store today).
int64_t KvBytesPerToken(const ModelConfig& config);

// Whole blocks of `block_size` tokens that fit in `bytes`.
int64_t KvBlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes);

}  // namespace crossreg
