// Acceptance remembered across the requests of one engine, for the adaptive draft
// length (draft_length_policy.h): without it each short request on a model whose drafts
// do not pay buys the same lesson again (`crossreg-bench-xr --adaptive_alone`). Per
// acceptance class (mode, β and τ, forking, n-gram assist, greedy or sampled): pooled
// per-depth acceptance, forgetting slowly, which seeds a new request's tracker as at
// most kPriorWeight verdicts per depth, and the probe schedule, counted over the class's
// requests so probing costs a share of the engine's AR forwards, not of each request's.
// Slot 0 is a request's main tracker, slot n > 0 adaptive n-gram's of match class n.
// Exactness is untouched: what a request reads here was measured on forwards already
// verified (a seed reproduces an adaptive request only at the same load and history).
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/generation_request.h"

namespace crossreg {

// The acceptance class of a request: "lossless/greedy", "lossy:0.5:-2/sampled",
// "ngram:3/greedy", with forking and n-gram assist spelled out where set.
std::string AcceptanceClassKey(const GenerationRequest& request);

class AcceptanceMemory {
 public:
  static constexpr double kPooledDecay = 0.99;  // pooled counts remember ~100 verdicts per depth
  static constexpr double kPriorWeight = 8.0;   // a new request's seed: at most this many verdicts per depth
  static constexpr int kMaxProbeInterval = 1024;  // class AR forwards between probes, at most
  static constexpr int kMaxClasses = 256;        // more (lossy β/τ are free floats): forget them all

  // Seeds `tracker` (a new request's) with the class's pooled acceptance at `slot`;
  // leaves it as it is when the class has none.
  void Seed(const std::string& cls, int slot, AcceptanceTracker& tracker) const;
  // `tracker` (a request's) chose an AR forward: one step back towards the class's pooled
  // acceptance at `slot` (AcceptanceTracker::RevertToward), or toward its prior.
  void Revert(const std::string& cls, int slot, AcceptanceTracker& tracker) const;
  // One verified forward's verdicts at `slot`: verdicts[k-1] for the draft at depth k.
  void Record(const std::string& cls, int slot, const std::vector<bool>& verdicts);

  // The class's probe schedule (ProbeSchedule, capped at kMaxProbeInterval): the next AR
  // forward a request of the class chose should probe instead.
  bool ProbeDue(const std::string& cls, int first_interval) const;
  // Such a forward ran, as AR or (`probed`) as a probe.
  void CountArForward(const std::string& cls, int first_interval, bool probed);
  // A request of the class chose to draft: probes start over.
  void DraftsPay(const std::string& cls, int first_interval);

  int classes() const;
  void Clear();  // forget every class

 private:
  struct Class {
    std::vector<AcceptanceTracker> slots;  // grown on demand, kMaxGamma deep
    ProbeSchedule probes;
  };
  Class& Get(const std::string& cls);  // with mu_ held
  const AcceptanceTracker* Pooled(const std::string& cls, int slot) const;  // with mu_ held; null: none

  // std::mutex: ThreadSanitizer sees it (Debian's Abseil lacks absl::Mutex's annotations).
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Class> classes_;  // guarded by mu_
};

}  // namespace crossreg
