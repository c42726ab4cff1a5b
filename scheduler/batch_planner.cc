#include "scheduler/batch_planner.h"

#include <algorithm>

namespace crossreg {

namespace {

enum class Attempt { kPlanned, kNeedsPreemption };

// One planning pass over `active` (sorted by admission). kNeedsPreemption: the
// decode rows lack blocks, or nothing could run.
Attempt PlanOnce(const std::vector<PlannerSequence>& active, int64_t free_blocks, const PlannerLimits& limits,
                 BatchPlan& plan) {
  plan.decode.clear();
  plan.prefill.clear();
  int64_t budget = limits.max_batch_tokens;
  int64_t free = free_blocks;

  std::vector<const PlannerSequence*> decoding;
  for (const auto& s : active) {
    if (!s.prefilling) decoding.push_back(&s);
  }
  std::stable_sort(decoding.begin(), decoding.end(), [](const PlannerSequence* a, const PlannerSequence* b) {
    return a->last_served_step < b->last_served_step;
  });
  for (const PlannerSequence* s : decoding) {
    // The budget may leave a sequence for the next step, but never the first one:
    // a step always makes progress.
    if (!plan.decode.empty() && s->max_decode_rows > budget) continue;
    const int64_t need = KvExtraBlocks(s->kv_length + s->pending_kv_rows, s->kv_blocks, limits.block_size);
    if (need > free) return Attempt::kNeedsPreemption;
    free -= need;
    budget = std::max<int64_t>(0, budget - s->max_decode_rows);
    plan.decode.push_back({s->id, s->max_decode_rows});
  }
  for (const auto& s : active) {
    if (!s.prefilling) continue;
    if (budget <= 0) break;
    // Positions the sequence's own blocks plus every free block still hold.
    const int64_t fit = (s.kv_blocks + free) * limits.block_size - s.kv_length;
    const int64_t chunk = std::min({budget, s.pending_kv_rows, fit});
    if (chunk <= 0) continue;
    free -= KvExtraBlocks(s.kv_length + chunk, s.kv_blocks, limits.block_size);
    budget -= chunk;
    plan.prefill.push_back({s.id, static_cast<int>(chunk)});
  }
  return plan.empty() && !active.empty() ? Attempt::kNeedsPreemption : Attempt::kPlanned;
}

}  // namespace

BatchPlan PlanBatch(std::vector<PlannerSequence> running, const PlannerLimits& limits) {
  std::stable_sort(running.begin(), running.end(), [](const PlannerSequence& a, const PlannerSequence& b) {
    return a.admit_order < b.admit_order;
  });
  BatchPlan plan;
  int64_t free = limits.free_blocks;
  while (PlanOnce(running, free, limits, plan) == Attempt::kNeedsPreemption) {
    plan.decode.clear();
    plan.prefill.clear();
    if (running.size() == 1) {
      plan.fail = running.front().id;
      return plan;
    }
    // The most recently admitted gives its blocks back and waits: those it alone holds
    // (counted per sequence, so a block two victims share is not counted: the plan may
    // preempt one more than needed, never fewer).
    const PlannerSequence& victim = running.back();
    free += victim.freeable_blocks < 0 ? victim.kv_blocks : victim.freeable_blocks;
    plan.preempt.push_back(running.back().id);
    running.pop_back();
  }
  return plan;
}

}  // namespace crossreg
