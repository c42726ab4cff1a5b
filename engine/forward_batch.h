// One ragged batch: rows from many sequences, each at its own position.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

struct BatchRow {
  SequenceId seq = 0;
  int32_t position = 0;  // RoPE position; for control rows also the KV slot written
  int32_t token = 0;
  bool want_logits = false;  // return this row's logits
  // Predictive stream: base + LoRA weights, K/V kept only for this forward.
  bool predictive = false;
  // Predictive rows only: which chain of its sequence this row belongs to. Each
  // (sequence, branch) is a separate group with its own start position, so a decoder
  // can run several draft chains (e.g. one per acceptance outcome) in one forward.
  int32_t branch = 0;
  // Predictive rows only: this (sequence, branch) group is an outcome block (TiDAR's
  // layout, docs/algorithm.md "Outcome blocks"): it attends the sequence's positions
  // below its start, cached or written by this forward's control rows, and every row
  // of the group, before and after itself (bidirectional inside the block). Every row
  // of a group must agree.
  bool block = false;
  // Logit rows only: return a RowSummary (engine/forward_output.h) instead of the
  // row's logits: the argmax, the max logit and the logit of `summary_token` (-1:
  // none). Greedy decoding needs no more, and a GPU then keeps the row on the device.
  bool summary = false;
  int32_t summary_token = -1;
};

// Control rows (the base model) of one sequence append consecutive positions
// starting at the sequence's current KV length; each attends every earlier position
// of its sequence, cached or in this batch, so the batch is causal per sequence.
// Predictive rows of one (sequence, branch) group take consecutive positions starting
// at some P0 no greater than the KV length before the forward; each attends the
// cached positions [0, P0) and the rows of its group up to itself, never control rows
// or other branches of this batch. A branch b >= 1 may instead start above the KV
// length, inside branch 0's positions: it then forks from branch 0, attending branch
// 0's rows below its start as a shared prefix (tree attention without recomputing
// them). An outcome block (BatchRow::block) of sequence s may start anywhere up to the
// end of s's control rows in this batch: it reads the control rows below its start
// through the cache they were written to, and it attends all of its own rows.
// Predictive K/V is dropped after the forward.
struct ForwardBatch {
  std::vector<BatchRow> rows;
  int num_logit_rows() const {
    int n = 0;
    for (const auto& r : rows) n += r.want_logits ? 1 : 0;
    return n;
  }
  int num_summary_rows() const {
    int n = 0;
    for (const auto& r : rows) n += r.want_logits && r.summary ? 1 : 0;
    return n;
  }
};

}  // namespace crossreg
