// What the adaptive draft length decided for one decode forward: made by
// DraftLengthController::Choose, carried by the step's plan, applied by Observe once the
// forward ran (a plan dropped before its forward leaves nothing behind).
#pragma once

namespace crossreg {

struct DraftDecision {
  enum class Kind {
    kFixed,        // not adaptive, or nothing to choose: the verdicts are recorded, nothing else moves
    kDraft,        // drafts pay at this cost: γ' > 0, and the probe schedules start over
    kAr,           // they do not: plain AR; the estimate reverts a step toward the class's, the probe count advances
    kProbe,        // a probe in place of such an AR forward: the probe schedule fires and backs off
    kProbeVerify,  // Cross-Regression: the forward after a probe, verifying its drafts
    kTimedAr,      // an AR step the cost calibration asked for: no verdict on the drafts, nothing moves
  };
  Kind kind = Kind::kFixed;
  int gamma = 0;           // γ' (0: AR)
  int ngram_match = 0;     // adaptive n-gram: the match class the drafts come from (0: none)
  int first_interval = 0;  // AR forwards before a probe, as this forward's cost sets it
};

}  // namespace crossreg
