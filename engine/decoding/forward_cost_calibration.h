// How far the start-up cost curve is off for the forwards a server actually runs, kept
// per kind of forward. The curve (forward_cost_curve.h) is timed once, on one sequence
// at context 64 with nothing else running. Under load it is off in two directions at
// once: decode-only forwards of many sequences cost more than it says (longer contexts,
// many sequences, the server's own threads on the same cores), while wide forwards
// carrying a prefill chunk cost less a row than its slope (`crossreg-server
// --adaptive_gamma` under `crossreg-loadgen --concurrency 16` shows both: the server logs
// the curve at start-up and exports actual / curve per kind of forward as
// crossreg_forward_cost_curve_scale; docs/algorithm.md, "Live correction", has figures). The adaptive draft length values a drafted token
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

// What a step of one sequence decoding alone costs, as a multiple of the curve's
// forward at its rows: a scale learnt at two anchors, the AR steps and the steps that
// carried drafts, each at its mean row count, interpolated linearly in rows between
// them and held at the nearer anchor outside. One scale for all forwards corrects the
// curve's level, not its shape, and a curve timed at start-up in a moment slower or
// faster for some sizes than others keeps the wrong shape: a "flat" start-up curve
// prices drafts far below what the drafting steps then cost, and adaptive decoding
// falls below AR; a "steep" one keeps every forward AR where drafts would pay. Both
// shapes, timed on one host class, and what this scale makes of them:
// docs/benchmarks.md, "Zen 5: adaptive draft length on a cost curve of the wrong shape".
// Steps are timed whole (planning, forward, verification): what the tokens pay for.
//
// Only single-sequence steps teach it and only they are priced with it: with several
// sequences a step's cost depends on how many there are and on their contexts as much
// as on its rows (under load AR steps run at a multiple of the curve, whose points are
// one sequence at context 64; docs/algorithm.md has the figure), so anchors pooled over batch
// sizes would read that as a slope in rows.
struct DecodeScaleShape {
  bool known = false;  // both anchors observed (kMinAnchorForwards steps each)
  double ar_rows = 1.0, ar_scale = 1.0;
  double draft_rows = 1.0, draft_scale = 1.0;
  // The scale at `rows` rows (1 when not known).
  double At(double rows) const;
};

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
  // give a scale too low: a control-only forward of 16 rows costs less than a
  // Cross-Regression one (both are in the curve crossreg-server logs at start-up).
  // Ignored when seconds or the curve's figure is not positive.
  void Observe(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill, double seconds);
  // A decode step of one sequence alone whose forward had `rows` rows, `predictive_rows`
  // of them predictive, that took `seconds` from planning to its verified tokens: an AR
  // step with one row, a drafting step with more.
  void ObserveSingleDecodeStep(const ForwardCostCurve& curve, int rows, int predictive_rows, double seconds);

  // actual / curve for this kind of forward; 1 until one was observed.
  double Scale(bool carries_prefill) const;
  // The single-sequence step's scale by rows, once each anchor has kMinAnchorForwards steps.
  DecodeScaleShape DecodeShape() const;
  // Drafting steps taught their anchor and AR steps have not: a sequence that always
  // drafts, because a curve of the wrong shape makes drafts look cheap, would never
  // correct it. A caller that keeps the calibration for long (a server, a benchmark)
  // then runs a lone adaptive sequence's next step as AR (DraftCost::ar_step_wanted),
  // kMinAnchorForwards such steps in its lifetime at most.
  bool WantsArStep() const;
  static constexpr int kMinAnchorForwards = 3;

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
    double rows = 0.0;  // mean rows of its forwards (the decode shape's anchors)
    long long forwards = 0;
    void Add(double log_ratio, int forward_rows, double weight);
  };
  double weight_;
  Kind decode_only_, with_prefill_;
  Kind ar_, drafting_;  // single-sequence decode steps without and with drafts
};

}  // namespace crossreg
