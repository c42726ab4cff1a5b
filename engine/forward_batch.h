// One ragged batch: rows from many sequences, each at its own position.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/paged_kv_cache.h"

namespace crossreg {

struct BatchRow {
  SequenceId seq = 0;
  int32_t position = 0;  // RoPE position; for control rows also the KV slot written
  int32_t token = 0;
  bool want_logits = false;  // return this row's logits
  // Predictive stream: base + LoRA weights, K/V kept only for this forward.
  bool predictive = false;
};

// Control rows (the base model) of one sequence append consecutive positions
// starting at the sequence's current KV length; each attends every earlier position
// of its sequence, cached or in this batch, so the batch is causal per sequence.
// Predictive rows of one sequence take consecutive positions starting at some P0 no
// greater than the KV length before the forward; each attends the cached positions
// [0, P0) and the predictive rows of its sequence up to itself, never control rows
// of this batch. Their K/V is dropped after the forward.
struct ForwardBatch {
  std::vector<BatchRow> rows;
  int num_logit_rows() const {
    int n = 0;
    for (const auto& r : rows) n += r.want_logits ? 1 : 0;
    return n;
  }
};

}  // namespace crossreg
