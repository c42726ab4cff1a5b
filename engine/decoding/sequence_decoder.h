// One sequence's decoding state machine. Whoever builds batches (Generate for one
// sequence, the scheduler for many) asks it for the next forward's plan, appends the
// plan's rows, runs the forward and hands the plan back with the logits of its rows.
// Between decode iterations the KV cache holds every committed token except the
// newest (x_last), whose row opens the next forward.
//
// A decode iteration (ALGORITHM.md), as a choice, three values and their application:
//   Choose()    -> DraftChoice    γ' (adaptive requests: DraftLengthController::Choose), const
//   Plan()      -> StepPlan       rows [x_last, d_1..d_m] (control) + predictive chains;
//               const: a function of the committed tokens, the draft buffer and the choice
//   Verify()    -> VerifyOutcome  engine/decoding/verify.h, a pure function of the logits
//   OnForward() -> StepOutcome    commits the tokens to the decoder's state, installs the
//               refilled draft buffer, hands the decision and the verdicts to the
//               controller (Observe) and
//               says how many cached positions the sequence keeps (L+n); the caller
//               commits them to the cache, which the decoder never touches.
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
#include "engine/decoding/draft_length_controller.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/energy_acceptor.h"
#include "engine/decoding/generation_request.h"
#include "engine/decoding/ngram_drafter.h"
#include "engine/decoding/step_plan.h"
#include "engine/decoding/verify.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg {

enum class FinishReason { kNone, kStop, kLength, kContext };
const char* FinishReasonName(FinishReason r);
// What ended a request that finished with kStop.
enum class StopReason { kNone, kEos, kStopToken, kStopString, kGrammarComplete };

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

  // How the next forward decodes: the request's decoding, or for an adaptive request
  // (with `cost`: what rows cost) the draft length its controller picks among those
  // whose rows fit `max_decode_rows` (a scheduler passes what it reserved, at least
  // DecodeRowsBound()). Changes nothing: the decision travels in the plan and is
  // applied by OnForward, so a choice whose plan never runs leaves no trace.
  DraftChoice Choose(const DraftCost* cost = nullptr, int max_decode_rows = std::numeric_limits<int>::max()) const;
  // The next forward's share for this sequence: a prefill chunk of at most
  // `max_prefill_rows` rows, or the decode iteration `choice` describes.
  StepPlan Plan(const DraftChoice& choice, int max_prefill_rows) const;
  // Structured output, before the forward of `plan` (a decode plan): the grammar masks
  // its verification reads, at hand (GrammarState::PrepareMasks), computed within
  // `work`. False when some are not: their states are appended to `missing`, and the
  // sequence should sit this forward out until a worker has computed them (a plan
  // made again then is the same). True for prefill plans and requests without grammar.
  bool PrepareGrammarMasks(const StepPlan& plan, grammar::MaskWork& work,
                           std::vector<grammar::GrammarMatcher>* missing);
  bool constrained() const { return grammar_.active(); }
  // Rows the next decode iteration may use, for a scheduler's token budget
  // (DraftLengthController::RowsBound).
  int DecodeRowsBound(const ForwardCostCurve* curve) const { return controller_.RowsBound(curve); }
  // The forward of `plan` (the last Plan of this sequence's current state) ran:
  // `logits` holds its plan.logit_rows() rows, each whole or a summary as the plan's
  // rows asked. The outcome's kv_length is what the caller
  // must commit for sequence() before the next Plan.
  absl::StatusOr<StepOutcome> OnForward(const StepPlan& plan, const LogitRows& logits);
  // The sequence's KV moved to `seq` (admission after preemption, or a prefix-cache
  // hit), whose first `cached` positions already hold the K/V of tokens()'s first
  // `cached` tokens; the next plans compute the rest. At most tokens().size() - 1: the
  // newest token's row opens the next decode forward (the prompt's logits).
  absl::Status OnKvAttached(SequenceId seq, int64_t cached);

  bool prefilling() const { return cached_ < static_cast<int64_t>(tokens_.size()) - 1; }
  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  StopReason stop_reason() const { return stop_; }
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
  bool UsesNgrams() const { return request_.decoding.mode == DecodingMode::kNgram || request_.decoding.ngram_assist; }
  // One decode iteration's plan, in two parts: the drafts to verify (the buffer, or
  // the n-gram index's, trimmed to what fits), then the rows.
  StepPlan PlanDecode(const DraftChoice& choice) const;
  std::vector<int32_t> PlanDrafts(const DraftChoice& choice, StepPlan& plan) const;
  void LayOutRows(const std::vector<int32_t>& drafts, StepPlan& plan) const;
  // Structured output: the drafts up to the first one-hot draft the grammar forbids (the
  // first `one_hot` drafts are one-hot; after them, those the adapter proposed without q).
  void CutIllegalDrafts(std::vector<int32_t>& drafts, int one_hot) const;
  // Greedy requests ask the backend for row summaries instead of logits (Verify reads
  // no more at T = 0), except for the first decode forward's P_1: the prompt logits.
  void AskForSummaries(StepPlan& plan) const;
  // The drafts `plan` verifies, with their q: one-hot for n-gram drafts, moved out of
  // the buffer otherwise (Apply installs the refill in its place).
  DraftBuffer TakeDrafts(const StepPlan& plan);
  absl::Status CheckPlanIsCurrent(const StepPlan& plan) const;
  void Apply(const StepPlan& plan, VerifyOutcome outcome, StepOutcome& step);
  StopReason StopOf(int32_t token) const;  // kNone: the token does not end the request

  const GenerationRequest request_;
  const DecodingEnvironment env_;
  const int vocab_;
  SequenceId seq_;
  std::vector<int32_t> tokens_;
  int64_t cached_ = 0;            // positions whose KV is in the cache
  DraftBuffer buffer_;            // d_1 .. d_m for the next forward, with their q
  NgramIndex ngrams_;             // n-gram mode and assist: the committed context's index, always current
  EnergyAcceptor acceptor_;       // β, τ and the request's γ (reset every forward)
  DraftLengthController controller_;  // adaptive γ: acceptance, probes, the shared memory
  SpeculativeStats stats_;
  // Penalised requests: the prompt and generated tokens the adjustments read.
  TokenHistory history_;
  // Structured output: the grammar's state after the committed tokens.
  grammar::GrammarState grammar_;
  FinishReason finish_ = FinishReason::kNone;
  StopReason stop_ = StopReason::kNone;
  std::vector<float> first_logits_;
};

}  // namespace crossreg
