#include "engine/cuda/forward_plan.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace crossreg::cuda {

absl::StatusOr<ForwardPlan> PlanForward(const ForwardBatch& batch, PagedKvCache& kv, const ModelConfig& config,
                                        const KvCacheConfig& storage) {
  if (batch.rows.empty()) return absl::InvalidArgumentError("forward: empty batch");
  if (kv.config().num_blocks != storage.num_blocks || kv.config().block_size != storage.block_size) {
    return absl::InvalidArgumentError("forward: KV cache does not match the backend's storage");
  }
  const int rows = static_cast<int>(batch.rows.size());
  ForwardPlan plan;
  plan.rows = rows;
  plan.tokens.resize(rows);
  plan.positions.resize(rows);
  plan.slots.assign(rows, -1);
  plan.num_cached.assign(rows, 0);
  plan.num_own.assign(rows, 0);
  plan.group_begin.assign(rows, 0);
  plan.table_offset.assign(rows, 0);

  // Sequences in order of first appearance, so the layout is deterministic.
  std::vector<SequenceId> sequences;
  std::unordered_map<SequenceId, int64_t> next_control;      // next expected control position
  std::unordered_map<SequenceId, int64_t> next_predictive;   // next expected predictive position
  std::unordered_map<SequenceId, std::vector<int32_t>> groups;
  std::unordered_map<SequenceId, int64_t> control_count;
  for (int i = 0; i < rows; ++i) {
    const BatchRow& row = batch.rows[static_cast<size_t>(i)];
    if (!kv.IsLive(row.seq)) {
      return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": unknown sequence ", row.seq));
    }
    if (row.token < 0 || row.token >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": token ", row.token,
                                                     " outside the vocabulary [0, ", config.vocab_size, ")"));
    }
    if (row.position < 0 || row.position >= config.max_position) {
      return absl::OutOfRangeError(absl::StrCat("forward: row ", i, ": position ", row.position,
                                                " outside the context length ", config.max_position));
    }
    if (!next_control.contains(row.seq) && !next_predictive.contains(row.seq)) sequences.push_back(row.seq);
    plan.tokens[i] = row.token;
    plan.positions[i] = row.position;
    if (row.want_logits) plan.logit_rows.push_back(i);
    const int64_t cached = kv.length(row.seq);
    if (row.predictive) {
      auto [it, first] = next_predictive.try_emplace(row.seq, row.position);
      if (first && row.position > cached) {
        return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": predictive rows of sequence ", row.seq,
                                                       " start at position ", row.position, " but only ", cached,
                                                       " positions are cached"));
      }
      if (row.position != it->second) {
        return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": predictive rows of sequence ", row.seq,
                                                       " must take consecutive positions"));
      }
      ++it->second;
      auto& group = groups[row.seq];
      plan.num_cached[i] = row.position - static_cast<int32_t>(group.size());
      plan.num_own[i] = static_cast<int32_t>(group.size()) + 1;
      group.push_back(i);
      plan.predictive_rows.push_back(i);
      continue;
    }
    auto [it, inserted] = next_control.try_emplace(row.seq, cached);
    if (row.position != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": sequence ", row.seq, " expects position ",
                                                     it->second, ", got ", row.position,
                                                     " (rows of a sequence must append consecutive positions)"));
    }
    ++it->second;
    ++control_count[row.seq];
    plan.num_cached[i] = row.position + 1;
  }

  int64_t blocks_needed = 0;
  for (const auto& [seq, end] : next_control) blocks_needed += kv.BlocksNeeded(seq, end);
  if (blocks_needed > kv.free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("forward: KV cache full: batch needs ", blocks_needed,
                                                     " blocks, ", kv.free_blocks(), " free"));
  }
  for (const auto& [seq, end] : next_control) {
    if (absl::Status s = kv.Reserve(seq, end); !s.ok()) return s;
  }

  std::unordered_map<SequenceId, int32_t> table_offset_of;
  for (SequenceId seq : sequences) {
    table_offset_of[seq] = static_cast<int32_t>(plan.block_tables.size());
    const auto& table = kv.block_table(seq);
    plan.block_tables.insert(plan.block_tables.end(), table.begin(), table.end());
    if (auto g = groups.find(seq); g != groups.end()) {
      const auto begin = static_cast<int32_t>(plan.group_rows.size());
      for (int32_t r : g->second) plan.group_begin[r] = begin;
      plan.group_rows.insert(plan.group_rows.end(), g->second.begin(), g->second.end());
    }
    if (auto c = control_count.find(seq); c != control_count.end()) plan.appended.emplace_back(seq, c->second);
  }
  // Never an empty table: the kernels index it only for attended positions, but a
  // zero-length upload region would alias the next array.
  if (plan.block_tables.empty()) plan.block_tables.push_back(0);
  for (int i = 0; i < rows; ++i) {
    const BatchRow& row = batch.rows[static_cast<size_t>(i)];
    plan.table_offset[i] = table_offset_of[row.seq];
    if (!row.predictive) plan.slots[i] = static_cast<int32_t>(kv.SlotOf(row.seq, row.position));
  }
  return plan;
}

}  // namespace crossreg::cuda
