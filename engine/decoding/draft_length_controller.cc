#include "engine/decoding/draft_length_controller.h"

#include <algorithm>
#include <cmath>

#include "engine/decoding/ngram_drafter.h"

namespace crossreg {

DraftLengthController::DraftLengthController(const GenerationRequest& request, const DecodingEnvironment& env)
    : decoding_(request.decoding),
      acceptance_(std::max(1, request.decoding.gamma)),
      match_acceptance_(static_cast<size_t>(NgramMatchClasses(std::max(1, request.decoding.ngram_max))),
                        AcceptanceTracker(std::max(1, request.decoding.gamma))) {
  if (env.acceptance_memory == nullptr || request.decoding.mode == DecodingMode::kAutoregressive) return;
  memory_ = env.acceptance_memory;
  memory_class_ = AcceptanceClassKey(request);
  if (request.decoding.adaptive_gamma) {  // start from what earlier requests of the class saw
    memory_->Seed(memory_class_, 0, acceptance_);
    for (size_t n = 0; n < match_acceptance_.size(); ++n) {
      memory_->Seed(memory_class_, static_cast<int>(n) + 1, match_acceptance_[n]);
    }
  }
}

AcceptanceTracker& DraftLengthController::TrackerFor(int ngram_match) {
  if (ngram_match <= 0) return acceptance_;
  return match_acceptance_[static_cast<size_t>(std::min<int>(ngram_match, match_acceptance_.size()) - 1)];
}

int DraftLengthController::MemorySlot(int ngram_match) const {
  return std::clamp(ngram_match, 0, static_cast<int>(match_acceptance_.size()));
}

int DraftLengthController::ProbeGamma() const {
  // Probes use the cheapest draft length that still verifies one draft: they measure
  // depth-1 acceptance, and deeper drafts follow once that pays.
  return std::min(decoding_.gamma, DraftCapacity(decoding_, 1) > 0 ? 1 : 2);
}

int DraftLengthController::RowsBound(const ForwardCostCurve* curve) const {
  const DecodingConfig& d = decoding_;
  if (!d.adaptive_gamma || curve == nullptr || !IsCrossRegression(d.mode) || last_gamma_ > 0) return MaxDecodeRows(d);
  return MaxDecodeRows(WithGamma(d, ProbeGamma()));
}

int DraftLengthController::Choose(const DraftCost& cost, int max_decode_rows, int ngram_match) {
  // n-gram with no context match has nothing to verify (and nothing to probe).
  if (decoding_.mode == DecodingMode::kNgram && ngram_match <= 0) return last_gamma_ = 0;
  AcceptanceTracker& acceptance = TrackerFor(ngram_match);
  const int slot = MemorySlot(ngram_match);
  const DecodingConfig& d = decoding_;
  const int probe = ProbeGamma();
  // The draft lengths whose rows fit what the caller reserved (a scheduler's bound).
  int fits = d.gamma;
  while (fits > 0 && MaxDecodeRows(WithGamma(d, fits)) > max_decode_rows) --fits;
  // A probe (and, for Cross-Regression, the forward that verifies it) costs more than an
  // AR forward: probe no more often than keeps that extra cost within kProbeBudget of
  // the AR forwards around it, so a sequence whose drafts never pay loses at most that.
  // Both at this forward's margin: under load a probe's rows cost several of this
  // sequence's shares of the forward, not a fraction of a one-row forward.
  const int probe_forwards = IsCrossRegression(d.mode) ? 2 : 1;
  const double extra =
      probe_forwards * cost.MarginalSeconds(d.mode, MaxDecodeRows(WithGamma(d, probe)) - 1) / cost.ArShare(d.mode);
  const int first_interval =
      std::clamp(static_cast<int>(std::ceil(extra / kProbeBudget)), kFirstProbeInterval, kMaxProbeInterval);
  if (probe_forwards_ > 0) {  // the forward after an XR probe verifies its drafts
    --probe_forwards_;
    return last_gamma_ = probe <= fits ? probe : 0;
  }
  // A step the cost calibration times as AR; it is no verdict on the drafts, so the
  // probe schedules and the acceptance memory do not count it.
  if (cost.ar_step_wanted) return last_gamma_ = 0;
  const int chosen = fits == 0 ? 0 : ChooseGamma(fits == d.gamma ? d : WithGamma(d, fits), acceptance, cost);
  if (chosen > 0) {
    probes_.DraftsPay(first_interval);
    if (memory_ != nullptr) memory_->DraftsPay(memory_class_, first_interval);
    return last_gamma_ = chosen;
  }
  // Plain AR forwards learn nothing about acceptance. With a memory, each one moves the
  // request's estimate a step back toward the class's pooled one. Otherwise a burst of
  // failed first drafts freezes it below the point where drafts pay, in AR until the
  // next probe (~45 AR forwards on the ~110M model at kProbeBudget), though the class's
  // drafts pay. A class whose drafts never pay pools an estimate as low as the
  // request's own, so this does not make it draft.
  if (memory_ != nullptr) memory_->Revert(memory_class_, slot, acceptance);
  // After a run of AR forwards, probe (a count-based choice), backing off exponentially
  // while probes fail. With a memory the run is counted over the class's requests
  // (acceptance_memory.h).
  const bool due = memory_ != nullptr ? memory_->ProbeDue(memory_class_, first_interval)
                                      : probes_.ArForward(first_interval, kMaxProbeInterval);
  if (!due || probe > fits) return last_gamma_ = 0;
  probe_forwards_ = probe_forwards - 1;
  return last_gamma_ = probe;
}

void DraftLengthController::Observe(int ngram_match, const std::vector<bool>& verdicts) {
  AcceptanceTracker& tracker = TrackerFor(ngram_match);
  for (size_t k = 0; k < verdicts.size(); ++k) tracker.Record(static_cast<int>(k) + 1, verdicts[k]);
  if (memory_ != nullptr) memory_->Record(memory_class_, MemorySlot(ngram_match), verdicts);
}

}  // namespace crossreg
