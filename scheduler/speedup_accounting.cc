#include "scheduler/speedup_accounting.h"

#include <algorithm>
#include <cmath>

namespace crossreg {

void ForwardCostModel::Sums::Add(double weight, double rows, double seconds) {
  w += weight;
  r += weight * rows;
  t += weight * seconds;
  rr += weight * rows * rows;
  rt += weight * rows * seconds;
}

ForwardCostModel::ForwardCostModel(std::vector<std::pair<int, double>> anchor, double anchor_weight, double half_life)
    : anchor_(std::move(anchor)), anchor_weight_(anchor_weight), decay_(std::exp2(-1.0 / std::max(1.0, half_life))) {
  Refit();
}

void ForwardCostModel::Observe(int rows, double seconds) {
  if (rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  live_.w *= decay_;
  live_.r *= decay_;
  live_.t *= decay_;
  live_.rr *= decay_;
  live_.rt *= decay_;
  live_.Add(1.0, rows, seconds);
  Refit();
}

void ForwardCostModel::Refit() {
  Sums s = live_;
  for (const auto& [rows, seconds] : anchor_) s.Add(anchor_weight_, rows, seconds);
  if (s.w <= 0) return;
  const double mean_r = s.r / s.w, mean_t = s.t / s.w;
  const double var_r = s.rr / s.w - mean_r * mean_r;
  const double cov = s.rt / s.w - mean_r * mean_t;
  if (var_r > 1e-9 * std::max(1.0, mean_r * mean_r)) {
    per_row_ = std::max(0.0, cov / var_r);
    fixed_ = std::max(0.0, mean_t - per_row_ * mean_r);
    if (fixed_ == 0.0) per_row_ = s.rr > 0 ? std::max(0.0, s.rt / s.rr) : 0.0;  // the best line through 0
  } else {
    // One row count only: the split between fixed and per-row cost is unknown. Charge
    // it all per row (what a compute-bound CPU shows), the conservative choice for
    // speculation: extra rows are never free.
    fixed_ = 0;
    per_row_ = mean_r > 0 ? mean_t / mean_r : 0.0;
  }
}

void SpeedupAccounting::OnForward(const ForwardReport& forward, std::array<ModeSeconds, kNumDecodingModes>* out) {
  if (out != nullptr) *out = {};
  if (forward.sequences.empty() || forward.rows <= 0) return;
  const double n = static_cast<double>(forward.sequences.size());
  const double c0 = model_.fixed(), c1 = model_.per_row();
  const double predicted = c0 + c1 * forward.rows;
  // Before the model knows anything, charge by rows.
  const double scale = predicted > 0 ? forward.seconds / predicted : 0.0;
  for (const SequenceForward& s : forward.sequences) {
    if (s.prefill) continue;
    double actual, ar_per_token;
    if (scale > 0) {
      actual = scale * (c0 / n + c1 * s.rows);
      ar_per_token = scale * (c0 / n + c1);
    } else {
      actual = forward.seconds * s.rows / forward.rows;
      ar_per_token = forward.seconds / forward.rows;
    }
    const size_t m = static_cast<size_t>(s.mode);
    if (m >= totals_.size()) continue;
    ModeSeconds charge{actual, ar_per_token * s.committed};
    totals_[m].actual += charge.actual;
    totals_[m].ar_equivalent += charge.ar_equivalent;
    if (out != nullptr) {
      (*out)[m].actual += charge.actual;
      (*out)[m].ar_equivalent += charge.ar_equivalent;
    }
  }
  // Learn from this forward after charging it, so its charge used what was known before.
  model_.Observe(forward.rows, forward.seconds);
}

}  // namespace crossreg
