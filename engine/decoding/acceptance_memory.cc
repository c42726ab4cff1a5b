#include "engine/decoding/acceptance_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace crossreg {

std::string AcceptanceClassKey(const GenerationRequest& request) {
  const DecodingConfig& d = request.decoding;
  std::string key = DecodingModeName(d.mode);
  if (d.mode == DecodingMode::kLossy) absl::StrAppend(&key, ":", d.beta, ":", d.tau);
  if (d.mode == DecodingMode::kNgram) absl::StrAppend(&key, ":", d.ngram_max);
  // Forks change what the drafts rest on; their depth follows γ' and is left out.
  if (d.mode != DecodingMode::kNgram && d.forked()) absl::StrAppend(&key, ":forked", d.fork_outcomes);
  if (d.mode != DecodingMode::kNgram && d.blocks()) absl::StrAppend(&key, ":blocks", d.fork_outcomes);
  if (d.mode != DecodingMode::kNgram && d.ngram_assist) absl::StrAppend(&key, ":assist");
  absl::StrAppend(&key, request.sampling.greedy() ? "/greedy" : "/sampled");
  // The drafter's rule sets how often its sampled drafts pass (n-gram drafts pass with
  // probability P(d) under every rule); the default is left unspelled.
  if (!request.sampling.greedy() && d.mode == DecodingMode::kLossless &&
      d.sampled_verification != SampledVerification::kSeedExact) {
    absl::StrAppend(&key, ":", SampledVerificationName(d.sampled_verification));
  }
  return key;
}

const AcceptanceTracker* AcceptanceMemory::Pooled(const std::string& cls, int slot) const {
  const auto it = classes_.find(cls);
  if (it == classes_.end() || slot < 0 || slot >= static_cast<int>(it->second.slots.size())) return nullptr;
  return &it->second.slots[static_cast<size_t>(slot)];
}

void AcceptanceMemory::Seed(const std::string& cls, int slot, AcceptanceTracker& tracker) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (const AcceptanceTracker* pooled = Pooled(cls, slot)) tracker.SeedFrom(*pooled, kPriorWeight);
}

void AcceptanceMemory::Revert(const std::string& cls, int slot, AcceptanceTracker& tracker) const {
  static const AcceptanceTracker kNothingPooled(1);
  std::lock_guard<std::mutex> lock(mu_);
  const AcceptanceTracker* pooled = Pooled(cls, slot);
  tracker.RevertToward(pooled != nullptr ? *pooled : kNothingPooled, kPriorWeight);
}

void AcceptanceMemory::Record(const std::string& cls, int slot, const std::vector<bool>& verdicts) {
  if (verdicts.empty() || slot < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Class& c = Get(cls);
  while (static_cast<int>(c.slots.size()) <= slot) c.slots.emplace_back(kMaxGamma, kPooledDecay);
  AcceptanceTracker& pooled = c.slots[static_cast<size_t>(slot)];
  for (size_t k = 0; k < verdicts.size(); ++k) pooled.Record(static_cast<int>(k) + 1, verdicts[k]);
}

bool AcceptanceMemory::ProbeDue(const std::string& cls, int first_interval) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = classes_.find(cls);
  return (it == classes_.end() ? ProbeSchedule{} : it->second.probes).Due(first_interval);
}

void AcceptanceMemory::CountArForward(const std::string& cls, int first_interval, bool probed) {
  std::lock_guard<std::mutex> lock(mu_);
  Get(cls).probes.Count(first_interval, kMaxProbeInterval, probed);
}

void AcceptanceMemory::DraftsPay(const std::string& cls, int first_interval) {
  std::lock_guard<std::mutex> lock(mu_);
  Get(cls).probes.DraftsPay(first_interval);
}

int AcceptanceMemory::classes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(classes_.size());
}

void AcceptanceMemory::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  classes_.clear();
}

AcceptanceMemory::Class& AcceptanceMemory::Get(const std::string& cls) {
  auto it = classes_.find(cls);
  if (it != classes_.end()) return it->second;
  // A client cycling through lossy β/τ values must not grow the memory without bound;
  // forgetting every class costs only the lesson each one learnt.
  if (static_cast<int>(classes_.size()) >= kMaxClasses) classes_.clear();
  return classes_[cls];
}

}  // namespace crossreg
