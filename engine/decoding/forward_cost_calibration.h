// How far the start-up cost curve is off for the forwards a server actually runs, kept
// per kind of forward. The curve (forward_cost_curve.h) is timed once, on one sequence
// at context 64 with nothing else running. Under load it errs both ways at once:
// decode-only forwards of many sequences cost more than it says, wide forwards carrying
// a prefill chunk less a row than its slope (crossreg_forward_cost_curve_scale exports
// both; docs/algorithm.md, "Live correction"). Adaptive γ values a drafted token at a
// decode-only forward's cost and prices rows at the margin of the forward they join, so
// the two errors would not cancel: each kind is corrected from its own forwards.
//
// Each kind keeps the geometric mean of actual / curve seconds with exponential
// forgetting, one ratio clamped to [1/4, 4] (a page fault must not swing it). Like the
// curve, the scales steer γ' only. It is the server's one forward-cost model: adaptive
// γ prices rows with it and the speedup accounting splits each forward's time with its
// affine form (Affine), so the decisions and the dashboard read the same costs.
#pragma once

#include <map>
#include <vector>

#include "engine/decoding/forward_cost_curve.h"

namespace crossreg {

// What a step of one sequence decoding alone costs, as a multiple of the curve's
// forward at its rows: a scale learnt at each row count the steps ran at (AR steps at
// one row, drafting steps at theirs), interpolated linearly in rows between these
// anchors and held at the nearest outside. A curve timed in a moment slower or faster
// for some sizes than others has the wrong shape, which one scale cannot correct: a
// "flat" one prices drafts below what the drafting steps cost (adaptive then runs below
// AR), a "steep" one keeps every forward AR where drafts pay, and a step's rows differ
// between γ' 1, its probe and deeper drafts (docs/benchmarks.md, "Zen 5: adaptive draft
// length on a cost curve of the wrong shape"). Steps are timed whole (planning, forward,
// verification): what the tokens pay for. Only single-sequence steps teach it and are
// priced with it: a batch's step cost depends on its sequences and contexts as much as
// on its rows.
struct DecodeScaleShape {
  struct Anchor {
    int rows = 1;
    double scale = 1.0;
  };
  // By rows, the first at one row (AR steps); empty until AR steps and drafting steps
  // of at least one row count were each observed kMinAnchorForwards times.
  std::vector<Anchor> anchors;
  bool known() const { return anchors.size() >= 2; }
  double ar_scale() const { return known() ? anchors.front().scale : 1.0; }
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

  // A forward of `rows` rows (prefill included), `predictive_rows` of them predictive,
  // took `seconds`: compared with the curve of its own shape, the control-only points
  // with no predictive rows, the Cross-Regression points (half predictive) at half or
  // more, linear in between. Ignored unless both figures are positive.
  void Observe(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill, double seconds);
  // A decode step of one sequence alone, planning to verified tokens (one row: AR).
  void ObserveSingleDecodeStep(const ForwardCostCurve& curve, int rows, int predictive_rows, double seconds);

  // actual / curve for this kind of forward; 1 until one was observed.
  double Scale(bool carries_prefill) const;
  // The single-sequence step's scale by rows, from the row counts with kMinAnchorForwards steps.
  DecodeScaleShape DecodeShape() const;
  // The drafting steps' scale, their anchors' geometric mean weighted by steps (1 when none).
  double DraftingStepScale() const;
  // Drafting steps taught an anchor and AR steps have not (a curve that makes drafts look
  // cheap would never be corrected): a lone adaptive sequence's next step should be AR
  // (DraftCost::ar_step_wanted), kMinAnchorForwards such steps in a lifetime at most.
  bool WantsArStep() const;
  static constexpr int kMinAnchorForwards = 3;

  // Seconds the model expects for a forward of this shape, at its kind's scale.
  double Predict(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill) const;
  // The model as an affine cost at this shape: per_row the chord slope of the prediction
  // from one row to max(2, rows), fixed the rest (never negative: then all is per row).
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
  Kind ar_;                       // single-sequence decode steps without drafts
  std::map<int, Kind> drafting_;  // ... and with, by rows
};

}  // namespace crossreg
