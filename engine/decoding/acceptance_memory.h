// Acceptance remembered across the requests of one engine, for the adaptive draft
// length (draft_length_policy.h).
//
// Without it every request learns alone: its AcceptanceTracker starts at the prior
// (α = 1/2 at every depth) and its probe schedule starts over, so on a model whose
// drafts do not pay each short request buys the same lesson again. On stories260K at
// γ = 4 (128-token requests, TPF 1.00) that lesson, a probe of two wider forwards per
// request, holds adaptive lossless at 0.95–0.96× AR (the rows that learn alone in
// `crossreg-bench-xr --model stories260K.gguf --gammas=4 --modes=lossless --adaptive_alone`).
//
// The memory keeps, per acceptance class (what decides acceptance besides the text:
// mode, β and τ, forking, n-gram assist, greedy or sampled):
//   - pooled per-depth acceptance, forgetting slowly: a new request's tracker starts
//     from it, weighted as at most kPriorWeight observations per depth, so the
//     request's own outcomes take over within a few forwards (its tracker forgets the
//     seed as it records, like any old observation);
//   - the probe schedule: AR forwards since the last probe and the backoff, counted
//     over all requests of the class, so probing costs a share of the engine's AR
//     forwards, not of each request's, and the backoff may reach kMaxProbeInterval.
// Slot 0 is a request's main tracker; slot n > 0 the adaptive n-gram tracker for
// drafts of match class n (NgramMatchClass, engine/decoding/ngram_drafter.h).
//
// Exactness is untouched: what a request reads here was measured on forwards already
// verified (its own or other requests'), never on the drafts about to be verified.
// Sampled outputs keep the distribution of AR (tests/unit/cross_regression_exactness_test.cc);
// a seed reproduces an adaptive request's output only at the same load and history.
//
// Thread-safe: the scheduler's thread and Generate() callers may share one memory.
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
  // `tracker` (a request's) ran an AR forward by its own choice: one step back towards
  // the class's pooled acceptance at `slot` (AcceptanceTracker::RevertToward), so a
  // burst of failures does not hold a request in AR until the next probe while the
  // class's drafts pay. Without a pooled estimate the tracker ages toward its prior.
  void Revert(const std::string& cls, int slot, AcceptanceTracker& tracker) const;
  // One verified forward's verdicts at `slot`: verdicts[k-1] for the draft at depth k.
  void Record(const std::string& cls, int slot, const std::vector<bool>& verdicts);

  // The class's probe schedule: true when the next forward a request of the class would
  // run as AR, because its estimate says drafts do not pay, should probe instead.
  // Probes come every `first_interval` such forwards, doubling after each probe up to
  // max(kMaxProbeInterval, first_interval).
  bool ProbeDue(const std::string& cls, int first_interval) const;
  // Such a forward ran, as AR or (`probed`) as a probe.
  void CountArForward(const std::string& cls, int first_interval, bool probed);
  // A request of the class chose to draft from its estimate: probes start over at
  // `first_interval`.
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

  // std::mutex, as in the scheduler: ThreadSanitizer sees it (Debian's Abseil is built
  // without the annotations that would let it see absl::Mutex).
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Class> classes_;  // guarded by mu_
};

}  // namespace crossreg
