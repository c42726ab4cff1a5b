// How far the start-up cost curve (forward_cost_curve.h: one sequence, context 64,
// nothing else running) is off for the forwards a server runs. Under load it errs both
// ways at once: decode-only forwards of many sequences cost more than it says, wide
// forwards carrying a prefill chunk less a row than its slope (docs/algorithm.md, "Live
// correction"), so each kind is corrected from its own forwards: the geometric mean of
// actual / curve seconds with exponential forgetting, one ratio clamped to [1/4, 4] (a
// page fault must not swing it). The scales steer γ' only. It is the server's one
// forward-cost model: adaptive γ prices rows with it and the speedup accounting splits
// each forward's time with its affine form (Affine), so both read the same costs.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "engine/decoding/forward_cost_curve.h"

namespace crossreg {

// What a decode-only step of B sequences costs, as a multiple of the curve's forward at
// its rows: a scale learnt at each row count such steps ran at (AR steps at B rows,
// drafting steps at theirs), linear in rows between these anchors, held outside them.
// One scale cannot correct a curve of the wrong shape (timed in a moment slower for some
// sizes than others), and a step's cost depends on how many sequences share it as much
// as on its rows. Steps are timed whole (planning, forward, verification): what the
// tokens pay for.
struct DecodeScaleShape {
  struct Anchor {
    int rows = 1;
    double scale = 1.0;
  };
  // By rows, the first at B rows (AR steps); empty until AR steps and drafting steps
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
  // took `seconds`: compared with the curve of its own shape (CurveSeconds). Ignored
  // unless both figures are positive.
  void Observe(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill, double seconds);
  // A decode-only step of `sequences` sequences, planning to verified tokens (`rows` ==
  // `sequences`: AR).
  void ObserveDecodeStep(const ForwardCostCurve& curve, int sequences, int rows, int predictive_rows, double seconds);

  // actual / curve for this kind of forward; 1 until one was observed.
  double Scale(bool carries_prefill) const;
  // The scale by rows of steps of `sequences` sequences (row counts with kMinAnchorForwards steps).
  DecodeScaleShape DecodeShape(int sequences) const;
  // One sequence alone's drafting steps' scale, geometric mean weighted by steps (1: none).
  double DraftingStepScale() const;
  // Drafting steps of `sequences` sequences taught an anchor and AR steps have not (a
  // curve that makes drafts look cheap would never be corrected): the next such step
  // should be AR (DraftCost::ar_step_wanted), kMinAnchorForwards a batch size at most.
  bool WantsArStep(int sequences) const;
  static constexpr int kMinAnchorForwards = 3;

  // Seconds the model expects for a forward of this shape, at its kind's scale.
  double Predict(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill) const;
  // The model as an affine cost at this shape: per_row the chord slope of the prediction
  // from one row to max(2, rows), fixed the rest (never negative: then all is per row).
  AffineCost Affine(const ForwardCostCurve& curve, int rows, int predictive_rows, bool carries_prefill) const;

 private:
  struct Kind {
    double log_scale = 0.0;
    long long forwards = 0;
    void Add(double log_ratio, double weight);
  };
  double weight_;
  Kind decode_only_, with_prefill_;
  std::map<std::pair<int, int>, Kind> steps_;  // decode-only steps by (sequences, rows)
};

}  // namespace crossreg
