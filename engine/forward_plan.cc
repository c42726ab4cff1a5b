#include "engine/forward_plan.h"

#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace crossreg {

namespace {

// Predictive groups are keyed by (sequence, branch): each branch is its own chain.
using GroupKey = std::pair<SequenceId, int32_t>;

// What one pass over the rows learns, besides the per-row fields of the plan.
struct RowScan {
  std::vector<SequenceId> sequences;                     // in order of first appearance
  std::unordered_map<SequenceId, int64_t> next_control;  // control rows' end position
  std::map<GroupKey, std::vector<int32_t>> groups;       // predictive rows by chain
  std::map<GroupKey, bool> block;                        // outcome blocks, by chain
};

// Where a predictive group's attention starts: the cache below `cache_part`, then
// branch 0's rows `shared` (attended, not recomputed), then its own rows.
struct GroupLayout {
  int64_t cache_part = 0;
  std::vector<int32_t> shared;
  bool block = false;  // every row attends every row of the group
};

// The checks of one row on its own.
absl::Status CheckRow(const BatchRow& row, int i, const PagedKvCache& kv, const ModelConfig& config) {
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
  if (row.branch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": negative predictive branch ", row.branch));
  }
  if (!row.predictive && row.branch != 0) {
    return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": a control row cannot name a branch"));
  }
  if (row.block && !row.predictive) {
    return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": an outcome block's rows are predictive"));
  }
  if (row.summary && !row.want_logits) {
    return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": a summary needs want_logits"));
  }
  if (row.summary && (row.summary_token < -1 || row.summary_token >= config.vocab_size)) {
    return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": summary token ", row.summary_token,
                                                   " outside the vocabulary [0, ", config.vocab_size,
                                                   ") (-1: none)"));
  }
  return absl::OkStatus();
}

// Checks every row and fills the plan's per-row fields and its logit rows; learns the
// sequences, the control rows' ends and the predictive chains.
absl::StatusOr<RowScan> ScanRows(const ForwardBatch& batch, const PagedKvCache& kv, const ModelConfig& config,
                                 ForwardPlan& plan) {
  RowScan scan;
  std::map<GroupKey, int64_t> next_predictive;  // next expected position of each group
  std::unordered_map<SequenceId, bool> has_predictive;
  for (int i = 0; i < plan.rows; ++i) {
    const BatchRow& row = batch.rows[static_cast<size_t>(i)];
    if (absl::Status s = CheckRow(row, i, kv, config); !s.ok()) return s;
    if (!scan.next_control.contains(row.seq) && !has_predictive.contains(row.seq)) scan.sequences.push_back(row.seq);
    plan.tokens[i] = row.token;
    plan.positions[i] = row.position;
    if (row.want_logits) {
      if (row.summary) {
        plan.summary_rows.push_back(static_cast<int32_t>(plan.logit_rows.size()));
        plan.summary_tokens.push_back(row.summary_token);
      }
      plan.logit_rows.push_back(i);
    }
    if (row.predictive) {
      has_predictive[row.seq] = true;
      const GroupKey key{row.seq, row.branch};
      auto [it, first] = next_predictive.try_emplace(key, row.position);
      if (row.position != it->second) {
        return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": predictive rows of sequence ", row.seq,
                                                       " (branch ", row.branch, ") must take consecutive positions"));
      }
      ++it->second;
      if (auto [b, new_group] = scan.block.try_emplace(key, row.block); !new_group && b->second != row.block) {
        return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": predictive rows of sequence ", row.seq,
                                                       " (branch ", row.branch,
                                                       ") mix outcome-block and chain rows"));
      }
      scan.groups[key].push_back(i);
      plan.predictive_rows.push_back(i);
      continue;
    }
    auto [it, inserted] = scan.next_control.try_emplace(row.seq, kv.length(row.seq));
    if (row.position != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("forward: row ", i, ": sequence ", row.seq, " expects position ",
                                                     it->second, ", got ", row.position,
                                                     " (rows of a sequence must append consecutive positions)"));
    }
    ++it->second;
    plan.num_cached[i] = row.position + 1;
  }
  return scan;
}

// Where each group's attention starts. A group starting at or below the cached
// length attends the cache below its start. A branch b >= 1 that starts above it
// forks from branch 0: it attends the cache below branch 0's start, then branch
// 0's rows up to its own start (shared, not recomputed), then its own rows.
absl::StatusOr<std::map<GroupKey, GroupLayout>> LayOutGroups(const RowScan& scan, const ForwardBatch& batch,
                                                             const PagedKvCache& kv) {
  std::map<GroupKey, GroupLayout> layouts;
  for (const auto& [key, members] : scan.groups) {
    const auto& [seq, branch] = key;
    const int64_t cached = kv.length(seq);
    const int64_t p0 = batch.rows[static_cast<size_t>(members.front())].position;
    GroupLayout layout;
    layout.block = scan.block.at(key);
    if (layout.block) {
      // The control rows below p0 are in the cache by the time any row attends.
      const auto control = scan.next_control.find(seq);
      const int64_t written = control == scan.next_control.end() ? cached : control->second;
      if (p0 > written) {
        return absl::InvalidArgumentError(absl::StrCat("forward: row ", members.front(), ": outcome block of sequence ",
                                                       seq, " (branch ", branch, ") starts at position ", p0,
                                                       " but the sequence's positions end at ", written));
      }
      layout.cache_part = p0;
    } else if (p0 <= cached) {
      layout.cache_part = p0;
    } else {
      const auto main = scan.groups.find(GroupKey{seq, 0});
      const int64_t s0 = main == scan.groups.end() || branch == 0
                             ? -1
                             : batch.rows[static_cast<size_t>(main->second.front())].position;
      if (s0 < 0 || s0 > cached || s0 + static_cast<int64_t>(main->second.size()) < p0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "forward: row ", members.front(), ": predictive rows of sequence ", seq, " (branch ", branch,
            ") start at position ", p0, " but only ", cached,
            " positions are cached and no branch-0 rows of the sequence reach that position"));
      }
      layout.cache_part = s0;
      layout.shared.assign(main->second.begin(), main->second.begin() + (p0 - s0));
    }
    layouts.emplace(key, std::move(layout));
  }
  return layouts;
}

// The control rows' blocks, all or nothing.
absl::Status ReserveControlRows(const RowScan& scan, KvTransaction& kv) {
  int64_t blocks_needed = 0;
  for (const auto& [seq, end] : scan.next_control) blocks_needed += kv.cache().BlocksNeeded(seq, end);
  if (blocks_needed > kv.cache().free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("forward: KV cache full: batch needs ", blocks_needed,
                                                     " blocks, ", kv.cache().free_blocks(), " free"));
  }
  for (const auto& [seq, end] : scan.next_control) {
    if (absl::Status s = kv.Reserve(seq, end); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Block tables, predictive groups and KV slots, after the reservation.
void FillTables(const RowScan& scan, const std::map<GroupKey, GroupLayout>& layouts, const ForwardBatch& batch,
                const PagedKvCache& kv, ForwardPlan& plan) {
  std::unordered_map<SequenceId, int32_t> table_offset_of;
  for (SequenceId seq : scan.sequences) {
    table_offset_of[seq] = static_cast<int32_t>(plan.block_tables.size());
    const auto& table = kv.block_table(seq);
    plan.block_tables.insert(plan.block_tables.end(), table.begin(), table.end());
    for (auto g = scan.groups.lower_bound(GroupKey{seq, 0}); g != scan.groups.end() && g->first.first == seq; ++g) {
      const GroupLayout& layout = layouts.at(g->first);
      const auto begin = static_cast<int32_t>(plan.group_rows.size());
      const auto shared = static_cast<int32_t>(layout.shared.size());
      plan.group_rows.insert(plan.group_rows.end(), layout.shared.begin(), layout.shared.end());
      plan.group_rows.insert(plan.group_rows.end(), g->second.begin(), g->second.end());
      for (size_t k = 0; k < g->second.size(); ++k) {
        const int32_t r = g->second[k];
        plan.group_begin[r] = begin;
        plan.num_cached[r] = static_cast<int32_t>(layout.cache_part);
        plan.num_own[r] = shared + (layout.block ? static_cast<int32_t>(g->second.size()) : static_cast<int32_t>(k) + 1);
      }
    }
  }
  // Never an empty table: the kernels index it only for attended positions, but a
  // zero-length upload region would alias the next array.
  if (plan.block_tables.empty()) plan.block_tables.push_back(0);
  for (int i = 0; i < plan.rows; ++i) {
    const BatchRow& row = batch.rows[static_cast<size_t>(i)];
    plan.table_offset[i] = table_offset_of[row.seq];
    if (!row.predictive) plan.slots[i] = static_cast<int32_t>(kv.SlotOf(row.seq, row.position));
  }
}

}  // namespace

absl::StatusOr<ForwardPlan> PlanForward(const ForwardBatch& batch, KvTransaction& transaction,
                                        const ModelConfig& config, const KvCacheConfig& storage) {
  const PagedKvCache& kv = transaction.cache();
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
  absl::StatusOr<RowScan> scan = ScanRows(batch, kv, config, plan);
  if (!scan.ok()) return scan.status();
  absl::StatusOr<std::map<GroupKey, GroupLayout>> layouts = LayOutGroups(*scan, batch, kv);
  if (!layouts.ok()) return layouts.status();
  if (absl::Status s = ReserveControlRows(*scan, transaction); !s.ok()) return s;
  FillTables(*scan, *layouts, batch, kv, plan);
  // What each control row writes, for the prefix cache to key the blocks it fills.
  for (const BatchRow& row : batch.rows) {
    if (!row.predictive) transaction.RecordToken(row.seq, row.position, row.token);
  }
  return plan;
}

}  // namespace crossreg
