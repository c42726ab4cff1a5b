// Adaptive draft length (ALGORITHM.md, PERFORMANCE: "γ must adapt to the measured
// cost curve (smaller γ, or AR) instead of being fixed"). Before each decode forward a
// sequence picks γ' ∈ [0, γ] maximising its steady-state tokens per second:
//     E[tokens | γ'] / cost(rows(γ')),
// E from its own recent per-depth acceptance, cost from the measured curve with the
// forward's fixed part shared by the sequences batched together. γ' = 0 is a plain AR
// forward. Exactness is untouched: γ' depends only on counts and timings measured
// before the forward, never on the drafts about to be verified.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/decoding/decoding_config.h"
#include "engine/decoding/forward_cost_calibration.h"
#include "engine/decoding/forward_cost_curve.h"

namespace crossreg {

// What the next forward's rows cost this sequence. A sequence's draft rows are costed
// at the margin of the forward as planned so far, T(R + extra) - T(R), and their
// expected extra tokens must pay for it at the cost of an AR token in a decode-only
// forward, T(B) / B: each accepted draft is a token the sequence will not decode later,
// in forwards of about B rows. Prefill rows sharing this forward are paid for whatever
// the sequence chooses, so they raise the margin (R counts them) but not what a token
// is worth. Priced at T(R0) / B with R0 counting them, drafts in prefill-carrying
// forwards would look nearly free on CPUs (a prefill chunk makes an AR token there
// "cost" more than ten times one in the decode forwards around it; docs/algorithm.md,
// "Adaptive draft length"), so weak adapters would draft there, and their unused
// reservations would cut the prefill chunks.
// Since T(B) <= T(R0), every draft chosen also earns its margin at the all-AR forward's
// rate B / T(R0); summed over the sequences the margins telescope to T(R_final) -
// T(R0), so the forward as planned commits at least the all-AR forward's expected
// tokens per second, whatever the curve's shape (flat on a GPU until the rows fill it,
// linear on two CPU cores). With one sequence and nothing planned this is T(rows)
// against T(1).
struct DraftCost {
  const ForwardCostCurve* curve = nullptr;
  int batch_sequences = 1;     // B: decoding sequences in the forward
  int base_rows = 1;           // R0: its rows with every decoding sequence in AR (prefill rows included; >= B)
  int planned_extra_rows = 0;  // draft rows that sequences planned before this one added
  // How far the curve is off for a decode-only forward, and for this forward
  // (forward_cost_calibration.h); 1 and 1 price with the curve as measured.
  double decode_scale = 1.0;
  double forward_scale = 1.0;
  // The single-sequence step's scale by rows, where both of its anchors were observed
  // (ForwardCostCalibration::DecodeShape). For one sequence decoding alone, a step of R
  // rows then costs At(R) · T(R): its share is that at one row and its draft rows cost
  // the rise, as the steps actually ran, whatever the curve's shape. Other forwards
  // ignore it.
  DecodeScaleShape decode_shape{};
  // The calibration asks for an AR step of one sequence decoding alone
  // (ForwardCostCalibration::WantsArStep): adaptive requests run this forward as AR
  // (DraftLengthController::Choose), unless it verifies a probe's drafts.
  bool ar_step_wanted = false;
  // The acceptance classes with a probe planned in this step (DraftLengthController::
  // Choose adds to it): the scheduler's, one per step; null: no such bound.
  std::vector<std::string>* step_probes = nullptr;
  // Seconds of a single-sequence step of `rows` rows: the shaped curve.
  double DecodeSeconds(DecodingMode mode, int rows) const;
  // Priced by the shape: one sequence decoding alone, and the shape known.
  bool Shaped() const { return decode_shape.known && batch_sequences <= 1 && base_rows <= 1; }
  // What one AR token costs this sequence in a decode-only forward, the value of each
  // extra token a draft is expected to commit: decode_scale · T(B) / B, and never more
  // than its share of this forward with every sequence in AR, forward_scale · T(R0) / B
  // (which keeps the all-AR guarantee above when the scales differ).
  double ArShare(DecodingMode mode) const;
  // Shaped: DecodeSeconds(R + extra) - DecodeSeconds(R), never below 0. Otherwise
  // min(1, forward_scale) · (T(R + extra) - T(R)) with R = R0 + planned_extra_rows: what
  // `extra` more rows add. The forward is priced as forward_scale · T(R0) plus the
  // curve's margin above R0, shrunk where the curve runs slow but never stretched: what
  // load adds to a forward is a cost per forward, not per row: under load
  // (`crossreg-server --adaptive_gamma` under `crossreg-loadgen --concurrency 16 --mode
  // ngram`) decode-only forwards cost a multiple of the curve, while each row past the
  // all-AR forward costs what the curve says (docs/algorithm.md, "Adaptive draft length",
  // has the figures). The all-AR guarantee holds for that price as for any other.
  double MarginalSeconds(DecodingMode mode, int extra) const;
};

// Per-depth acceptance with exponential forgetting, so a sequence that moves from
// boilerplate to novel text backs off within tens of forwards. Depth k counts the
// drafts verified at k (all earlier ones accepted): α_k = P(accept k | reached k).
// Each depth's estimate has a Beta prior of weight 2 centred on the depth above it
// (α_1's on 1/2): a depth never reached reads as the one above, not as a coin flip,
// so a sequence (or an acceptance memory, acceptance_memory.h) that knows only that
// first drafts fail does not expect deeper ones to succeed half the time.
class AcceptanceTracker {
 public:
  explicit AcceptanceTracker(int max_depth, double decay = 0.95);
  void Record(int depth, bool accepted);
  double Rate(int depth) const;          // α_k, with the prior above
  double ExpectedTokens(int drafts) const;  // 1 + Σ_{k ≤ drafts} Π_{j ≤ k} α_j
  // Takes `pooled`'s counts (acceptance_memory.h) scaled down to at most `weight`
  // verdicts per depth, in place of this tracker's: a prior its own records outweigh.
  void SeedFrom(const AcceptanceTracker& pooled, double weight);
  // One forward that verified nothing (an AR forward chosen from this estimate): the
  // tracker's own counts age by one step of its decay, as a verified forward would age
  // them, and the weight that frees goes to `pooled`'s counts seen as SeedFrom(pooled,
  // weight) would. A run of such forwards moves the estimate geometrically back to the
  // seed a new request would start from, instead of freezing it at its last verdicts.
  void RevertToward(const AcceptanceTracker& pooled, double weight);
  double Reached(int depth) const;  // forgetful count of drafts verified at `depth`

 private:
  double RateGivenPrior(int depth, double prior) const;  // α_depth with a prior centred on `prior`
  struct Counts {
    double reached = 0.0, accepted = 0.0;
  };
  // Depth k + 1's counts scaled down to at most `weight` verdicts (zero when never reached):
  // what SeedFrom and RevertToward take from a pooled tracker.
  Counts ScaledCounts(size_t k, double weight) const;
  double decay_;
  std::vector<double> reached_, accepted_;
};

// When AR forwards, which teach nothing about acceptance, give way to a probe: after
// `interval` of them, where the interval starts at `first`, doubles after each probe up
// to max(cap, first), and starts over when drafts pay. One per sequence learning alone,
// one per acceptance class in an AcceptanceMemory.
struct ProbeSchedule {
  int ar_streak = 0;  // AR forwards since the last probe
  int interval = 0;   // AR forwards before the next probe (0: not started)
  // The next AR forward should probe instead.
  bool Due(int first) const;
  // An AR forward ran (`probed`: a probe ran in its place, and the interval doubles).
  void Count(int first, int cap, bool probed);
  void DraftsPay(int first);
};

// Drafts the next forward verifies, at most, when it runs with draft length γ'.
int DraftCapacity(const DecodingConfig& config, int gamma_prime);
// `config` with γ' in place of γ (forks and their depth capped by γ').
DecodingConfig WithGamma(const DecodingConfig& config, int gamma_prime);
// A forward that verifies `drafts` one-hot drafts of text a grammar forces, for a request
// of any speculative mode: n-gram's shape (control rows only), the request's sampling rule.
DecodingConfig ForcedTextStep(const DecodingConfig& config, int drafts);
// How much faster than AR a draft length must expect to be to be chosen over it, where its
// cost is modelled rather than timed (DraftCost::Shaped).
inline constexpr double kDraftHurdle = 1.05;
// The γ' ∈ [0, config.gamma] with the best expected tokens per second, AR unless a draft
// length beats it by kDraftHurdle.
int ChooseGamma(const DecodingConfig& config, const AcceptanceTracker& acceptance, const DraftCost& cost);

}  // namespace crossreg
