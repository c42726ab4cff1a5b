// One ragged batch: rows from many sequences, each at its own position.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/paged_kv_cache.h"

namespace crossreg {

struct BatchRow {
  SequenceId seq = 0;
  int32_t position = 0;  // RoPE position; also the KV slot the row's K/V is written to
  int32_t token = 0;
  bool want_logits = false;  // return this row's logits
};

// Rows of one sequence must be consecutive positions starting at the sequence's
// current KV length (they are appended); a row attends every earlier position of
// its sequence, cached or in this batch, so the batch is causal per sequence.
struct ForwardBatch {
  std::vector<BatchRow> rows;
  int num_logit_rows() const {
    int n = 0;
    for (const auto& r : rows) n += r.want_logits ? 1 : 0;
    return n;
  }
};

}  // namespace crossreg
