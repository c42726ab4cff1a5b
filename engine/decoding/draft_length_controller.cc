#include "engine/decoding/draft_length_controller.h"

#include <algorithm>
#include <cmath>

#include "engine/decoding/ngram_drafter.h"

namespace crossreg {

DraftLengthController::DraftLengthController(const GenerationRequest& request, const DecodingEnvironment& env)
    : decoding_(request.decoding),
      trackers_(1 + static_cast<size_t>(NgramMatchClasses(std::max(1, request.decoding.ngram_max))),
                AcceptanceTracker(std::max(1, request.decoding.gamma))) {
  if (env.acceptance_memory == nullptr || request.decoding.mode == DecodingMode::kAutoregressive) return;
  memory_ = env.acceptance_memory;
  memory_class_ = AcceptanceClassKey(request);
  if (!request.decoding.adaptive_gamma) return;
  // Start from what earlier requests of the class saw.
  for (size_t slot = 0; slot < trackers_.size(); ++slot) {
    memory_->Seed(memory_class_, static_cast<int>(slot), trackers_[slot]);
  }
}

int DraftLengthController::Slot(int ngram_match) const {
  return std::clamp(ngram_match, 0, static_cast<int>(trackers_.size()) - 1);
}

int DraftLengthController::ProbeGamma() const {
  // The cheapest draft length that verifies one draft: deeper ones follow once that pays.
  return std::min(decoding_.gamma, DraftCapacity(decoding_, 1) > 0 ? 1 : 2);
}

int DraftLengthController::RowsBound(const ForwardCostCurve* curve) const {
  const DecodingConfig& d = decoding_;
  if (!d.adaptive_gamma || curve == nullptr || !IsCrossRegression(d.mode) || last_gamma_ > 0) return MaxDecodeRows(d);
  return MaxDecodeRows(WithGamma(d, ProbeGamma()));
}

int DraftLengthController::FirstProbeInterval(const DraftCost& cost) const {
  // A probe (and, for Cross-Regression, the forward verifying it) costs its margin over an
  // AR forward: probe no more often than keeps that within kProbeBudget of the AR forwards.
  const DecodingConfig& d = decoding_;
  const int probe_forwards = IsCrossRegression(d.mode) ? 2 : 1;
  const double extra =
      probe_forwards * cost.MarginalSeconds(d.mode, MaxDecodeRows(WithGamma(d, ProbeGamma())) - 1, cost.TimedAlone()) /
      cost.ArShare(d.mode, cost.TimedAlone());
  return std::clamp(static_cast<int>(std::ceil(extra / kProbeBudget)), kFirstProbeInterval, kMaxProbeInterval);
}

bool DraftLengthController::ProbeDue(const DraftCost& cost, int first_interval) const {
  if (memory_ == nullptr) return probes_.Due(first_interval);
  if (cost.step_probes != nullptr &&
      std::find(cost.step_probes->begin(), cost.step_probes->end(), memory_class_) != cost.step_probes->end()) {
    return false;  // the class probes once a step
  }
  return memory_->ProbeDue(memory_class_, first_interval);
}

DraftDecision DraftLengthController::Choose(const DraftCost& cost, int max_decode_rows, int ngram_match) const {
  using Kind = DraftDecision::Kind;
  DraftDecision decision{.kind = Kind::kAr, .gamma = 0, .ngram_match = ngram_match};
  // n-gram with no context match has nothing to verify (and nothing to probe).
  if (decoding_.mode == DecodingMode::kNgram && ngram_match <= 0) return {.kind = Kind::kFixed};
  const DecodingConfig& d = decoding_;
  const int probe = ProbeGamma();
  int fits = d.gamma;  // the draft lengths whose rows fit what the caller reserved
  while (fits > 0 && MaxDecodeRows(WithGamma(d, fits)) > max_decode_rows) --fits;
  if (probe_forwards_ > 0) {  // the forward after an XR probe verifies its drafts
    return {.kind = Kind::kProbeVerify, .gamma = probe <= fits ? probe : 0, .ngram_match = ngram_match};
  }
  // A step the cost calibration times as AR: no verdict on the drafts, counted nowhere.
  if (cost.ar_step_wanted) return {.kind = Kind::kTimedAr};
  decision.first_interval = FirstProbeInterval(cost);
  const AcceptanceTracker& acceptance = trackers_[Slot(ngram_match)];
  const int chosen = fits == 0 ? 0 : ChooseGamma(fits == d.gamma ? d : WithGamma(d, fits), acceptance, cost);
  if (chosen > 0) {
    decision.kind = Kind::kDraft;
    decision.gamma = chosen;
    return decision;
  }
  // After a run of AR forwards, probe, backing off while probes fail.
  if (probe <= fits && ProbeDue(cost, decision.first_interval)) {
    if (memory_ != nullptr && cost.step_probes != nullptr) cost.step_probes->push_back(memory_class_);
    decision.kind = Kind::kProbe;
    decision.gamma = probe;
  }
  return decision;
}

void DraftLengthController::Observe(const DraftDecision& decision, int ngram_match, const std::vector<bool>& verdicts) {
  using Kind = DraftDecision::Kind;
  const bool ar = decision.kind == Kind::kAr || decision.kind == Kind::kProbe;
  // AR forwards learn nothing; each moves the request's estimate a step back toward the
  // class's, so a burst of failed drafts does not freeze it in AR while the class's pay.
  if (ar && memory_ != nullptr) {
    memory_->Revert(memory_class_, Slot(decision.ngram_match), trackers_[Slot(decision.ngram_match)]);
  }
  AcceptanceTracker& tracker = trackers_[Slot(ngram_match)];
  for (size_t k = 0; k < verdicts.size(); ++k) tracker.Record(static_cast<int>(k) + 1, verdicts[k]);
  if (memory_ != nullptr) memory_->Record(memory_class_, Slot(ngram_match), verdicts);
  last_gamma_ = decision.gamma;
  switch (decision.kind) {
    case Kind::kFixed:
    case Kind::kTimedAr:
      return;
    case Kind::kProbeVerify:
      --probe_forwards_;
      break;
    case Kind::kDraft:
      probes_.DraftsPay(decision.first_interval);
      if (memory_ != nullptr) memory_->DraftsPay(memory_class_, decision.first_interval);
      break;
    case Kind::kAr:
    case Kind::kProbe: {
      const bool probed = decision.kind == Kind::kProbe;
      if (memory_ != nullptr) {
        memory_->CountArForward(memory_class_, decision.first_interval, probed);
      } else {
        probes_.Count(decision.first_interval, kMaxProbeInterval, probed);
      }
      if (probed && IsCrossRegression(decoding_.mode)) probe_forwards_ = 1;
      break;
    }
  }
}

}  // namespace crossreg
