// Adaptive draft length (ALGORITHM.md, PERFORMANCE): before each decode forward a
// sequence picks γ' ∈ [0, γ] (0: plain AR) maximising E[tokens | γ'] / cost(rows(γ')),
// E from its recent per-depth acceptance, the cost from the measured curve. Exactness
// is untouched: γ' depends only on what was measured before the forward.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/decoding/decoding_config.h"
#include "engine/decoding/forward_cost_calibration.h"
#include "engine/decoding/forward_cost_curve.h"

namespace crossreg {

// What the next forward's rows cost this sequence. Its draft rows are costed at the
// margin of the forward as planned so far, T(R + extra) - T(R), and their expected extra
// tokens must pay it at an AR token's cost in a decode-only forward, T(B) / B (an
// accepted draft is a token not decoded later). Prefill rows sharing the forward raise
// the margin, not a token's worth. Since T(B) <= T(R0) the margins telescope, so the
// forward as planned expects at least the all-AR forward's tokens per second, whatever
// the curve's shape (docs/algorithm.md, "Adaptive draft length").
struct DraftCost {
  const ForwardCostCurve* curve = nullptr;
  int batch_sequences = 1;     // B: decoding sequences in the forward
  int base_rows = 1;           // R0: its rows with every decoding sequence in AR (prefill rows included; >= B)
  int planned_extra_rows = 0;  // draft rows that sequences planned before this one added
  // How far the curve is off for a decode-only forward, and for this forward
  // (forward_cost_calibration.h).
  double decode_scale = 1.0;
  double forward_scale = 1.0;
  // Decode-only steps of B sequences, once they were timed (ForwardCostCalibration::
  // DecodeShape(B)): a step of R rows costs At(R) · T(R), as the steps actually ran.
  DecodeScaleShape decode_shape{};
  // The calibration asks for a timed AR step (ForwardCostCalibration::WantsArStep).
  bool ar_step_wanted = false;
  // The acceptance classes with a probe planned in this step (Choose adds to it); null: no bound.
  std::vector<std::string>* step_probes = nullptr;
  double DecodeSeconds(DecodingMode mode, int rows) const;  // a step of `rows` rows, by the shape
  // Priced by the shape: a decode-only forward (R0 = B), and the shape of B sequences known;
  // TimedAlone: one sequence so, priced by its own timed steps only, without kDraftHurdle.
  bool Shaped() const {
    return decode_shape.known() && base_rows == batch_sequences && decode_shape.anchors.front().rows == base_rows;
  }
  bool TimedAlone() const { return Shaped() && batch_sequences <= 1; }
  // What an AR token costs this sequence, the value of each token a draft commits: the
  // model's decode_scale · T(B) / B, at most forward_scale · T(R0) / B (the all-AR
  // guarantee when the scales differ), or (`timed`) DecodeSeconds(B) / B.
  double ArShare(DecodingMode mode, bool timed = false) const;
  // What `extra` more rows add, R = R0 + planned_extra_rows: the model's min(1,
  // forward_scale) · (T(R + extra) - T(R)) (load adds a cost per forward, not per row),
  // or (`timed`) DecodeSeconds(R + extra) - DecodeSeconds(R).
  double MarginalSeconds(DecodingMode mode, int extra, bool timed = false) const;
  // Tokens per second against AR of a draft expecting `tokens` tokens for `extra` rows:
  // tokens · share / (share + margin). A shaped batch's timed steps mix its sequences'
  // contexts and read noisier (the choice would favour anchors that read low), so it takes
  // the lower of the two pricings: drafts pay by both (docs/algorithm.md, "Live correction").
  double Speedup(DecodingMode mode, double tokens, int extra) const;
};

// Per-depth acceptance with exponential forgetting (a sequence moving from boilerplate
// to novel text backs off within tens of forwards): α_k = P(accept k | reached k). Each
// depth has a Beta prior of weight 2 centred on the depth above (α_1's on 1/2), so a
// depth never reached reads as the one above, not as a coin flip.
class AcceptanceTracker {
 public:
  explicit AcceptanceTracker(int max_depth, double decay = 0.95);
  void Record(int depth, bool accepted);
  double Rate(int depth) const;          // α_k, with the prior above
  double ExpectedTokens(int drafts) const;  // 1 + Σ_{k ≤ drafts} Π_{j ≤ k} α_j
  // Takes `pooled`'s counts scaled down to at most `weight` verdicts per depth.
  void SeedFrom(const AcceptanceTracker& pooled, double weight);
  // An AR forward chosen from this estimate: the counts age one step toward `pooled`'s
  // (as SeedFrom sees them), so a run of AR forwards does not freeze the estimate.
  void RevertToward(const AcceptanceTracker& pooled, double weight);
  double Reached(int depth) const;  // forgetful count of drafts verified at `depth`

 private:
  double RateGivenPrior(int depth, double prior) const;  // α_depth with a prior centred on `prior`
  struct Counts {
    double reached = 0.0, accepted = 0.0;
  };
  Counts ScaledCounts(size_t k, double weight) const;  // depth k + 1's, as SeedFrom takes them
  double decay_;
  std::vector<double> reached_, accepted_;
};

// When AR forwards (which teach nothing about acceptance) give way to a probe: after
// `interval` of them, starting at `first`, doubling after each probe up to max(cap,
// first), starting over when drafts pay. Per sequence alone, or per acceptance class.
struct ProbeSchedule {
  int ar_streak = 0;  // AR forwards since the last probe
  int interval = 0;   // AR forwards before the next probe (0: not started)
  bool Due(int first) const;  // the next AR forward should probe instead
  // An AR forward ran (`probed`: a probe ran in its place, and the interval doubles).
  void Count(int first, int cap, bool probed);
  void DraftsPay(int first);
};

// Drafts the next forward verifies, at most, when it runs with draft length γ'.
int DraftCapacity(const DecodingConfig& config, int gamma_prime);
// `config` with γ' in place of γ (forks and their depth capped by γ').
DecodingConfig WithGamma(const DecodingConfig& config, int gamma_prime);
// A forward verifying `drafts` one-hot drafts of grammar-forced text, in any speculative
// mode: n-gram's shape (control rows only).
DecodingConfig ForcedTextStep(const DecodingConfig& config, int drafts);
// How much faster than AR a draft length must expect to be, except for one sequence
// alone priced by its timed steps (DraftCost::Shaped).
inline constexpr double kDraftHurdle = 1.05;
// The γ' ∈ [0, config.gamma] with the best expected tokens per second, AR unless a draft
// length beats it by kDraftHurdle.
int ChooseGamma(const DecodingConfig& config, const AcceptanceTracker& acceptance, const DraftCost& cost);

}  // namespace crossreg
