// The adaptive draft length of one request (SGLang's choose / observe shape): Choose
// decides the next forward's γ' from the acceptance seen so far and what rows cost, and
// changes nothing; Observe applies that decision once its forward ran, so a plan made and
// dropped (a sequence left to wait for its grammar masks) moves nothing. γ' depends only
// on what was measured before the forward, never on the drafts about to be verified.
#pragma once

#include <string>
#include <vector>

#include "engine/decoding/acceptance_memory.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/draft_decision.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/generation_request.h"

namespace crossreg {

class DraftLengthController {
 public:
  // `request` passed ValidateGenerationRequest for `env`.
  DraftLengthController(const GenerationRequest& request, const DecodingEnvironment& env);

  // The next decode forward's γ' (0 = plain AR) and why, among the draft lengths whose
  // rows fit `max_decode_rows`. `ngram_match`: adaptive n-gram, the match class the
  // drafts would come from (NgramMatchClass; 0 = none). With an acceptance memory a class
  // probes once a step (`cost.step_probes`).
  DraftDecision Choose(const DraftCost& cost, int max_decode_rows, int ngram_match) const;
  // The forward of `decision` ran and verified drafts with these verdicts (verdicts[k-1]:
  // d_k accepted; n-gram: of match class `ngram_match`): everything moves as it says.
  void Observe(const DraftDecision& decision, int ngram_match, const std::vector<bool>& verdicts);

  // Rows the next decode iteration may use, for a scheduler's token budget: the request's
  // MaxDecodeRows, except after an AR forward of an adaptive Cross-Regression request,
  // which reserves a probe's rows (the full γ for every such sequence would starve
  // prefill chunks). n-gram rows are few, its drafts bursty.
  int RowsBound(const ForwardCostCurve* curve) const;

 private:
  static bool IsCrossRegression(DecodingMode m) { return m == DecodingMode::kLossless || m == DecodingMode::kLossy; }
  // The draft length of a probe: the cheapest that still verifies one draft.
  int ProbeGamma() const;
  // The tracker (and acceptance memory slot) of drafts of this match class: 0 for
  // Cross-Regression and n-gram without a match class, the class for n-gram.
  int Slot(int ngram_match) const;
  // The next AR forward should probe: this request's schedule, or its class's once a step.
  bool ProbeDue(const DraftCost& cost, int first_interval) const;
  // AR forwards between probes at this cost (kProbeBudget).
  int FirstProbeInterval(const DraftCost& cost) const;

  static constexpr int kFirstProbeInterval = 8;  // AR forwards before the first probe, at least
  static constexpr int kMaxProbeInterval = 128;   // ... between a lone request's probes, at most
  static constexpr double kProbeBudget = 0.03;  // probes' extra cost, as a fraction of the AR forwards

  const DecodingConfig decoding_;
  // Recent per-depth acceptance by Slot: adaptive n-gram keeps one per match class, since
  // a run of failed 1-token matches must not stop the drafts of a long repeat.
  std::vector<AcceptanceTracker> trackers_;
  // The engine's memory of acceptance (null: none) and this request's class there.
  AcceptanceMemory* memory_ = nullptr;
  std::string memory_class_;
  ProbeSchedule probes_;    // learning alone: when AR forwards give way to a probe
  int probe_forwards_ = 0;  // Cross-Regression: the forward after a probe verifies its drafts
  int last_gamma_ = 0;      // γ' of the last decode forward (0 = AR)
};

}  // namespace crossreg
