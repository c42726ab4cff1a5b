#include "engine/kv_storage.h"

namespace crossreg {

int64_t KvBytesPerToken(const ModelConfig& config) {
  return int64_t{config.num_layers} * 2 * config.kv_dim() * static_cast<int64_t>(sizeof(float));
}

int64_t KvBlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes) {
  const int64_t per_block = KvBytesPerToken(config) * block_size;
  return per_block > 0 ? bytes / per_block : 0;
}

}  // namespace crossreg
