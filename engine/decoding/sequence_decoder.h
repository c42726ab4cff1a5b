// One sequence's decoding state machine. Whoever builds batches (Generate for one
// sequence, the scheduler for many) asks it for the next forward's plan, appends the
// plan's rows, runs the forward and hands the plan back with the logits of its rows.
// Between decode iterations the KV cache holds every committed token except the
// newest (x_last), whose row opens the next forward.
//
// A decode iteration (ALGORITHM.md), as three values:
//   Plan()      -> StepPlan       rows [x_last, d_1..d_m] (control) + predictive chains
//   Verify()    -> VerifyOutcome  engine/decoding/verify.h, a pure function of the logits
//   OnForward() -> StepOutcome    commits the tokens to the decoder's state, installs the
//               refilled draft buffer and says how many cached positions the sequence
//               keeps (L+n); the caller commits them to the cache, which the decoder
//               never touches.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/decoding/acceptance_memory.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/energy_acceptor.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/ngram_drafter.h"
#include "engine/decoding/step_plan.h"
#include "engine/decoding/verify.h"
#include "engine/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg {

enum class FinishReason { kNone, kStop, kLength, kContext };
const char* FinishReasonName(FinishReason r);

struct SpeculativeStats {
  int64_t forwards = 0;   // decode forwards (prefill not counted)
  int64_t drafted = 0;    // draft tokens in the verified rows (m per forward)
  int64_t accepted = 0;   // draft tokens accepted
  int64_t committed = 0;  // tokens generated
  int64_t ar_forwards = 0;  // speculative requests: forwards the adaptive γ ran as plain AR
  std::vector<int64_t> drafted_per_position;   // [k-1]: drafts verified at depth k (reached)
  std::vector<int64_t> accepted_per_position;  // [k-1]: drafts accepted at depth k
  double tokens_per_forward() const { return forwards ? static_cast<double>(committed) / forwards : 0.0; }
};

class SequenceDecoder {
 public:
  // `request` must have passed ValidateGenerationRequest for `env`; `seq` is a fresh,
  // empty sequence of the cache the forwards will use.
  SequenceDecoder(const GenerationRequest& request, const DecodingEnvironment& env, SequenceId seq);

  // The next forward's share for this sequence: a prefill chunk of at most
  // `max_prefill_rows` rows, or one decode iteration. `cost` (adaptive_gamma requests):
  // what rows cost, to pick this forward's γ'. Call once per forward, then OnForward.
  // `max_decode_rows`: a decode iteration's rows, at most (adaptive requests pick γ'
  // among the draft lengths that fit; a scheduler passes what it reserved, at least
  // DecodeRowsBound()).
  StepPlan Plan(int max_prefill_rows, const DraftCost* cost = nullptr,
                int max_decode_rows = std::numeric_limits<int>::max());
  // Rows the next decode iteration may use, for a scheduler's token budget: MaxDecodeRows
  // of the request, except for an adaptive Cross-Regression request whose last decode
  // forward ran AR, which reserves a probe's rows (6 with forks, against 42 at γ = 8
  // with two forks) and drafts deeper from the next forward on. Reserving the full γ for
  // every such sequence would leave the prefill chunks a third of the budget at 8 forked
  // sequences, and at 16 would leave sequences out of forwards that run them all as AR.
  // (n-gram rows are few, and its drafts come in bursts that a ramp would cut.)
  int DecodeRowsBound(const ForwardCostCurve* curve) const;
  // The forward of `plan` ran: `logits` holds its plan.logit_rows() rows, each whole or
  // a summary as the plan's rows asked. The outcome's kv_length is what the caller
  // must commit for sequence() before the next Plan.
  absl::StatusOr<StepOutcome> OnForward(const StepPlan& plan, const LogitRows& logits);
  // The sequence's KV was dropped (preemption): the next plans recompute it into
  // `new_seq` (a fresh, empty sequence of the cache).
  void OnKvDropped(SequenceId new_seq);

  bool prefilling() const { return cached_ < static_cast<int64_t>(tokens_.size()) - 1; }
  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  SequenceId sequence() const { return seq_; }
  const GenerationRequest& request() const { return request_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // prompt + generated
  int64_t num_generated() const { return stats_.committed; }
  const SpeculativeStats& stats() const { return stats_; }
  // Logits that predicted the first generated token.
  const std::vector<float>& first_logits() const { return first_logits_; }
  // KV positions the next forward will append (for admission / preemption decisions).
  int64_t PendingKvRows() const;

 private:
  static bool IsCrossRegression(DecodingMode m) { return m == DecodingMode::kLossless || m == DecodingMode::kLossy; }
  // One decode iteration's plan, in three parts: the draft length (adaptive requests:
  // γ', with the n-gram drafts it was chosen for), the drafts to verify (the buffer,
  // trimmed to what fits), and the rows. FillDraftBuffer returns the main predictive
  // chain's length before forks.
  StepPlan PlanDecode(const DraftCost* cost, int max_decode_rows);
  std::vector<int32_t> ChooseDraftLength(const DraftCost* cost, int max_decode_rows, StepPlan& plan);
  int FillDraftBuffer(std::vector<int32_t> ngram_drafts, StepPlan& plan);
  void LayOutRows(int main_chain, StepPlan& plan) const;
  // The draft length of an adaptive probe: the cheapest that still verifies one draft.
  int ProbeGamma() const;
  // Greedy requests ask the backend for row summaries instead of logits (Verify reads
  // no more at T = 0), except for the first decode forward's P_1: the prompt logits.
  void AskForSummaries(StepPlan& plan) const;
  // Adaptive draft length: γ' for the next forward (0 = AR), with count-based probes.
  // `acceptance` is the tracker the forward's verdicts will feed, `slot` its slot in
  // the acceptance memory; an AR choice moves it back toward the memory's estimate.
  int AdaptiveGamma(const DraftCost& cost, AcceptanceTracker& acceptance, int slot, int max_decode_rows);
  // The tracker a plan's outcomes feed: adaptive n-gram keeps one per match length.
  AcceptanceTracker& TrackerFor(const StepPlan& plan);
  // Its slot in the acceptance memory: 0 for Cross-Regression, the match length for n-gram.
  int MemorySlot(const StepPlan& plan) const;
  static constexpr int kFirstProbeInterval = 8;   // AR forwards before the first probe, at least
  // ... and between probes, at most (unless probes are dear), for a request learning
  // alone; one sharing an AcceptanceMemory follows the class's schedule there.
  static constexpr int kMaxProbeInterval = 128;
  static constexpr double kProbeBudget = 0.03;    // probes' extra cost, as a fraction of the AR forwards
  void Apply(const StepPlan& plan, VerifyOutcome outcome, StepOutcome& step);
  bool IsStop(int32_t token) const;

  const GenerationRequest request_;
  const DecodingEnvironment env_;
  const int vocab_;
  SequenceId seq_;
  std::vector<int32_t> tokens_;
  int64_t cached_ = 0;            // positions whose KV is in the cache
  DraftBuffer buffer_;            // d_1 .. d_m for the next forward, with their q
  NgramIndex ngrams_;             // n-gram mode and assist: the committed context's index
  Rng rng_;
  EnergyAcceptor acceptor_;       // β, τ and the request's γ (reset every forward)
  AcceptanceTracker acceptance_;  // recent per-depth acceptance (adaptive γ)
  // Adaptive n-gram: the same per length of the context match the drafts came from
  // (index n - 1). A 3-token match predicts far better than a 1-token one, and a run of
  // failed 1-token drafts must not stop the drafts of a long repeat.
  std::vector<AcceptanceTracker> match_acceptance_;
  // The engine's memory of acceptance (null: none) and this request's class there.
  AcceptanceMemory* memory_ = nullptr;
  std::string memory_class_;
  ProbeSchedule probes_;          // adaptive, learning alone: when AR forwards give way to a probe
  int probe_forwards_ = 0;        // adaptive: forwards left at full γ after a probe
  int last_gamma_ = 0;            // adaptive: γ' of the last decode forward (0 = AR)
  bool plan_outstanding_ = false; // Plan() returned a plan whose forward has not come back
  SpeculativeStats stats_;
  FinishReason finish_ = FinishReason::kNone;
  std::vector<float> first_logits_;
};

}  // namespace crossreg
