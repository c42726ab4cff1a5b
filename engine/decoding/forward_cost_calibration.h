// How far the start-up cost curve is off for the forwards a server actually runs, kept
// per kind of forward. The curve (forward_cost_curve.h) is timed once, on one sequence
// at context 64 with nothing else running. Under load it is off in two directions at
// once: on two Zen 4 cores with the default model at concurrency 16, decode-only
// forwards of 16 sequences cost 4.5-5.6 ms against its 2.6-3.0 (longer contexts, many
// sequences, the server's own threads on the same cores), while 500-row forwards
// carrying a prefill chunk cost ~0.095 ms a row against its 0.13-0.145 slope
// (`crossreg-server --adaptive_gamma` under `crossreg-loadgen --concurrency 16`: the
// server logs the curve at start-up and exports actual / curve per kind of forward as
// crossreg_forward_cost_curve_scale). The adaptive draft length values a drafted token
// at a decode-only forward's cost and prices its rows at the margin of the forward it
// joins, so in a forward that carries a prefill chunk the two errors do not cancel: each
// kind's own error is corrected from the forwards timed as they run. A scale above 1
// raises a forward's price, not its margin (DraftCost::MarginalSeconds): load adds a
// cost per forward.
//
// Each kind keeps the geometric mean of actual / curve seconds with exponential
// forgetting (the first forward of a kind counts fully). One ratio is clamped to
// [1/4, 4]: a page fault or a descheduled thread must not swing the scale. Exactness
// is untouched: like the curve, the scales steer γ' only.
//
// It is the server's one forward-cost model: the adaptive draft length prices rows with
// it, and the speedup accounting splits each forward's measured time with its affine
// form at that forward's shape (Affine), so the decisions and the dashboard read the
// same costs.
#pragma once

#include "engine/decoding/forward_cost_curve.h"

namespace crossreg {

// T(R) ≈ fixed + per_row · R around one forward's shape.
struct AffineCost {
  double fixed = 0;
  double per_row = 0;
};

class ForwardCostCalibration {
 public:
  // `weight`: the share of the scale a new forward moves (0 < weight <= 1).
  explicit ForwardCostCalibration(double weight = 0.05);

  // A forward of `rows` rows (prefill rows included), `predictive_rows` of them in the
  // predictive stream, that took `seconds`. It is compared with the curve of its own
  // shape: the control-only points with no predictive rows (AR, n-gram, prefill), the
  // Cross-Regression points (half predictive) at half or more, linear in between. Read
  // against the Cross-Regression points alone, a server's AR and n-gram forwards would
  // give a scale ~12% low (default model: 2.24 against 2.54 ms at 16 rows, both in the
  // curve crossreg-server logs at start-up). Ignored when seconds or the curve's figure
  // is not positive.
  void Observe(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill, double seconds);

  // actual / curve for this kind of forward; 1 until one was observed.
  double Scale(bool carries_prefill) const;

  // Seconds the model expects for a forward of this shape: the curve, between its
  // control-only and Cross-Regression points by the predictive share, times the kind's
  // scale.
  double Predict(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill) const;
  // The model as an affine cost at this shape: per_row the chord slope of the
  // prediction from one row to `rows` (from one to two rows for a one-row forward),
  // fixed what the prediction at `rows` leaves (never negative: then all of it is
  // per row).
  AffineCost Affine(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill) const;

 private:
  struct Kind {
    double log_scale = 0.0;
    long long forwards = 0;
  };
  double weight_;
  Kind decode_only_, with_prefill_;
};

}  // namespace crossreg
