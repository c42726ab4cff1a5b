#include "engine/backend.h"

namespace crossreg {

absl::Status Backend::Forward(const ForwardBatch& batch, PagedKvCache& kv, std::vector<float>& logits) {
  absl::StatusOr<ForwardPlan> plan = PlanForward(batch, kv, config_, storage_);
  if (!plan.ok()) return plan.status();
  if (absl::Status computed = Compute(*plan, logits); !computed.ok()) {
    // Give back the blocks the plan reserved: the K/V written beyond each sequence's
    // length is garbage nobody will read.
    for (const auto& [seq, count] : plan->appended) (void)kv.Truncate(seq, kv.length(seq));
    return computed;
  }
  for (const auto& [seq, count] : plan->appended) {
    if (absl::Status s = kv.Advance(seq, count); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace crossreg
