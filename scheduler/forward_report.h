// What one forward did, per sequence in its batch: the scheduler's measurement of a
// step, handed to the MetricsSink as it happens (speculative counters per forward,
// the speedup accounting of speedup_accounting.h).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/decoding/decoding_config.h"

namespace crossreg {

struct SequenceForward {
  DecodingMode mode = DecodingMode::kAutoregressive;
  bool prefill = false;  // a prefill chunk (the last one commits the first token)
  int rows = 0;          // rows it put into the batch
  int committed = 0;     // tokens this forward committed for it
  // The scheduler thread's own seconds for this sequence in the step around the forward:
  // choosing and planning its rows (grammar masks included) and applying the forward's
  // output (verification, detokenizing, its events). Charged to it as measured.
  double cpu_seconds = 0;
  // Decode forwards of speculative requests (lossless, lossy, ngram): what Verify did.
  bool speculative = false;  // a decode forward of a speculative request
  bool ar_fallback = false;  // ... that the adaptive draft length ran as plain AR
  int drafted = 0;           // draft tokens verified
  int accepted = 0;          // ... and accepted
  // [k]: 1 if the draft at 0-based position k was verified (reached) / accepted.
  std::vector<int> drafted_at;
  std::vector<int> accepted_at;
};

struct ForwardReport {
  double seconds = 0;  // wall time of the forward
  // Wall time of the scheduler since it reported the previous forward, while busy (else
  // since this step began): the step's planning, the forward and applying its output, and
  // between steps delivering events, admitting, and waiting for grammar masks (0: the
  // forward alone). What it spent beyond the forward and the sequences' own cpu_seconds is
  // a cost per step: a mode that needs fewer steps pays it less often.
  double step_seconds = 0;
  int rows = 0;        // rows in the batch
  // How far the start-up cost curve is off, actual / curve seconds, for decode-only
  // forwards and for forwards carrying prefill, after this forward
  // (forward_cost_calibration.h); 1 when the scheduler has no curve or saw no such forward.
  double decode_cost_scale = 1.0;
  double prefill_cost_scale = 1.0;
  // What adaptive γ prices a sequence decoding alone with: its whole steps (planning,
  // forward, verification) over the curve's forward, AR steps and the steps that carried
  // drafts (their mean over the row counts' anchors; ForwardCostCalibration::DecodeShape);
  // 0 until both are known.
  double ar_step_scale = 0;
  double drafting_step_scale = 0;
  // A forward of one sequence decoding alone, once the calibration knows what its AR
  // steps take (ar_step_scale times the curve's one-row forward): a whole AR step as this
  // server ran them, planning to applying. The accounting prices AR's tokens with it
  // there, rather than with the affine cost model, whose shape is the start-up curve's
  // (0: not known, or not such a forward).
  double lone_ar_step_seconds = 0;
  // Of step_seconds, the time before this step began (since the previous report): events
  // delivered, requests admitted, masks waited for.
  double gap_seconds = 0;
  // The scheduler's forward-cost model (forward_cost_calibration.h) at this forward's
  // shape, T(R) ≈ fixed + per_row · R: what the speedup accounting splits the measured
  // time by. 0 and 0 when the scheduler has no cost curve.
  double fixed_seconds = 0;
  double per_row_seconds = 0;
  std::vector<SequenceForward> sequences;
};

}  // namespace crossreg
