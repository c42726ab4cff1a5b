// The base model the adapter fuzzer (and its seeds) load adapters against: two small
// layers with grouped-query attention, BOS 1 and EOS 2.
#pragma once

#include "engine/model/model_config.h"

namespace crossreg::fuzz {

inline const ModelConfig& AdapterBaseModel() {
  static const ModelConfig config = [] {
    ModelConfig c;
    c.vocab_size = 50;
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 4;
    c.max_position = 64;
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    return c;
  }();
  return config;
}

}  // namespace crossreg::fuzz
