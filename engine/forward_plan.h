// Host-side planning of one forward, shared by every backend: validates a
// ForwardBatch against the cache, reserves the control rows' blocks, and lays out
// the per-row integers attention needs (KV slots, attended counts, block tables,
// predictive groups). One planner means the CPU and CUDA backends accept and refuse
// exactly the same batches.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/forward_batch.h"
#include "engine/model/model_config.h"
#include "engine/kv/kv_transaction.h"

namespace crossreg {

struct ForwardPlan {
  int rows = 0;
  // Per row.
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;         // control rows: KV slot written; predictive rows: -1
  std::vector<int32_t> num_cached;    // cache positions attended: position + 1, or the group's P0
  std::vector<int32_t> num_own;       // predictive rows: group rows attended (itself included)
  std::vector<int32_t> group_begin;   // predictive rows: first entry of its group in group_rows
  std::vector<int32_t> table_offset;  // start of its sequence's table in block_tables
  // Shared.
  std::vector<int32_t> block_tables;     // each sequence of the batch once, after reservation
  std::vector<int32_t> group_rows;       // predictive row indices, grouped by (sequence, branch)
  std::vector<int32_t> predictive_rows;  // predictive row indices in batch order
  std::vector<int32_t> logit_rows;       // want_logits row indices in batch order
  // Which of them return a RowSummary instead of logits: indices into logit_rows, in
  // order, and the token each summary reports the logit of (-1: none).
  std::vector<int32_t> summary_rows;
  std::vector<int32_t> summary_tokens;

  bool predictive(int row) const { return slots[static_cast<size_t>(row)] < 0; }
  int full_logit_rows() const { return static_cast<int>(logit_rows.size() - summary_rows.size()); }
};

// Validates every row before touching the cache; on success the control rows' blocks
// are reserved in `kv` (all or nothing; each such sequence is then open in it) and the
// tokens they write recorded for the prefix cache. `storage` is the backend's K/V
// layout, which must match.
absl::StatusOr<ForwardPlan> PlanForward(const ForwardBatch& batch, KvTransaction& kv, const ModelConfig& config,
                                        const KvCacheConfig& storage);

}  // namespace crossreg
