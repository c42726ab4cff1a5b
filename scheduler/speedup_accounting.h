// The honest speedup of a decoding mode: the time AR would have needed for the tokens
// the mode committed, on this server at the batch sizes it ran, divided by the time
// the mode's sequences actually consumed. Defined in docs/metrics.md; computed per
// forward from measurements only, so it drops below 1 whenever a mode is slower than
// AR would have been, alone or sharing batches with others.
//
// A forward's time is modelled as affine in its rows, T(R) = c0 + c1·R (a fixed part:
// weights and launch overheads, shared by the batch; a per-row part). Each sequence of
// the batch is charged an equal share of c0 plus c1 per row it added; the charges are
// scaled to sum to the measured forward time. AR would have committed one token per
// forward with one row, so for the k tokens a sequence committed it would have been
// charged k·(c0/N + c1), scaled alike (N: sequences in the batch). c0 and c1 come
// from a weighted least-squares fit over recent forwards (exponentially forgotten),
// anchored by the cost curve measured at startup so that the fit stays defined when
// every recent forward had the same number of rows.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "engine/decoding/decoding_config.h"
#include "scheduler/forward_report.h"

namespace crossreg {

// The affine fit T(R) = c0 + c1·R.
class ForwardCostModel {
 public:
  // `anchor`: (rows, seconds) points measured at startup, each kept with a weight
  // that never decays below `anchor_weight`. `half_life`: forwards after which an
  // observation counts half.
  explicit ForwardCostModel(std::vector<std::pair<int, double>> anchor = {}, double anchor_weight = 2.0,
                            double half_life = 256);
  void Observe(int rows, double seconds);
  // Non-negative coefficients; {0, 0} before anything is known.
  double fixed() const { return fixed_; }
  double per_row() const { return per_row_; }

 private:
  void Refit();
  struct Sums {
    double w = 0, r = 0, t = 0, rr = 0, rt = 0;
    void Add(double weight, double rows, double seconds);
  };
  std::vector<std::pair<int, double>> anchor_;
  double anchor_weight_;
  double decay_;
  Sums live_;  // decayed observations
  double fixed_ = 0, per_row_ = 0;
};

// Seconds charged to one mode's decode steps, and what AR would have needed.
struct ModeSeconds {
  double actual = 0;
  double ar_equivalent = 0;
};

inline constexpr int kNumDecodingModes = 4;  // DecodingMode values 0..3

// Splits each forward's measured time among its sequences and accumulates, per
// mode, the decode seconds charged and their AR equivalent. Prefill chunks are
// charged their share (so decode sequences are not charged for them) but are not
// counted: the speedup is a decode speedup, the prefill being the same in every mode.
class SpeedupAccounting {
 public:
  explicit SpeedupAccounting(ForwardCostModel model) : model_(std::move(model)) {}
  // Charges the forward; `out` (optional) gets this forward's per-mode charges.
  void OnForward(const ForwardReport& forward, std::array<ModeSeconds, kNumDecodingModes>* out = nullptr);
  const std::array<ModeSeconds, kNumDecodingModes>& totals() const { return totals_; }
  const ForwardCostModel& model() const { return model_; }

 private:
  ForwardCostModel model_;
  std::array<ModeSeconds, kNumDecodingModes> totals_{};
};

}  // namespace crossreg
