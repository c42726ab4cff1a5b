// What one scheduler step runs: a pure function from the running sequences' sizes
// and the cache's free blocks to the rows of the next forward, the sequences to
// preempt first, and a sequence that can never fit. No engine objects, so the
// policy is testable as a table.
//
// Policy:
//  * decode/verify rows first, for every decoding sequence whose upper bound on rows
//    fits the token budget (the first one always does); the least recently served
//    go first, so sequences left out by the budget run in the next step;
//  * then prefill chunks in admission order under the remaining token budget,
//    each cut to the KV positions the free blocks still hold;
//  * when the decode rows need more blocks than are free, or nothing at all can run,
//    the most recently admitted sequence is preempted and the plan starts over (the
//    oldest sequence always progresses, so preemption cannot livelock);
//  * a sequence that cannot progress even alone in the cache is reported to fail.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/kv/paged_kv_cache.h"  // KvExtraBlocks: the cache's own block arithmetic

namespace crossreg {

struct PlannerSequence {
  int id = 0;                     // the caller's handle, echoed in the plan
  int64_t admit_order = 0;        // larger = admitted later (the preemption victim)
  int64_t last_served_step = -1;  // fairness among decode rows cut by the budget
  bool prefilling = false;
  int64_t kv_length = 0;          // valid cached positions
  int64_t kv_blocks = 0;          // blocks the sequence holds
  // Of them, the blocks freeing it gives back (prefix-cache blocks another sequence
  // also holds stay taken). -1: all of kv_blocks.
  int64_t freeable_blocks = -1;
  // KV positions the next forward would append: prefill, what is left of it; decode,
  // the upper bound 1 + gamma (1 for AR).
  int64_t pending_kv_rows = 0;
  // Decode only: upper bound on the rows (control + predictive) of one iteration.
  int max_decode_rows = 1;
};

struct PlannerLimits {
  int max_batch_tokens = 512;
  int64_t free_blocks = 0;
  int block_size = 16;
};

struct PlannedRows {
  int id = 0;
  int rows = 0;  // decode: upper bound on its rows; prefill: the chunk
};

struct BatchPlan {
  std::vector<PlannedRows> decode;   // batch order: these rows first
  std::vector<PlannedRows> prefill;  // then these chunks
  std::vector<int> preempt;          // free these sequences before the forward, in order
  // Cannot progress even as the only sequence in the cache (every other sequence is
  // in `preempt`): fail it with RESOURCE_EXHAUSTED.
  std::optional<int> fail;
  bool empty() const { return decode.empty() && prefill.empty(); }
};

BatchPlan PlanBatch(std::vector<PlannerSequence> running, const PlannerLimits& limits);

}  // namespace crossreg
