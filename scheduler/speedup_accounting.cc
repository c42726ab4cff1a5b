#include "scheduler/speedup_accounting.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace crossreg {

namespace {
// The weight of a new one-row step in what AR's steps are learnt to cost, once 1/n falls below it.
constexpr double kArStepWeight = 0.01;
}  // namespace

void SpeedupAccounting::LearnArStep(const ForwardReport& forward, double step_share) {
  bool all_one_row = true;
  for (const SequenceForward& s : forward.sequences) {
    if (s.prefill || s.rows != 1 || s.committed != 1) {
      all_one_row = false;
      continue;
    }
    ++ar_cpu_samples_;
    const double w = std::max(kArStepWeight, 1.0 / static_cast<double>(ar_cpu_samples_));
    ar_cpu_seconds_ += w * (s.cpu_seconds - ar_cpu_seconds_);
  }
  if (!all_one_row || forward.step_seconds <= 0) return;
  ++ar_step_samples_;
  const double w = std::max(kArStepWeight, 1.0 / static_cast<double>(ar_step_samples_));
  ar_step_share_ += w * (step_share - ar_step_share_);
  if (forward.sequences.size() != 1) return;
  ++ar_gap_samples_;
  ar_gap_seconds_ += std::max(kArStepWeight, 1.0 / static_cast<double>(ar_gap_samples_)) *
                     (forward.gap_seconds - ar_gap_seconds_);
}

void SpeedupAccounting::OnForward(const ForwardReport& forward, std::array<ModeSeconds, kNumDecodingModes>* out) {
  if (out != nullptr) *out = {};
  if (forward.sequences.empty() || forward.rows <= 0) return;
  const double n = static_cast<double>(forward.sequences.size());
  const double c0 = forward.fixed_seconds, c1 = forward.per_row_seconds;
  const double predicted = c0 + c1 * forward.rows;
  // Before the model knows anything, charge by rows.
  const double scale = predicted > 0 ? forward.seconds / predicted : 0.0;
  double cpu = 0, cheapest_cpu_per_token = std::numeric_limits<double>::infinity();
  for (const SequenceForward& s : forward.sequences) {
    cpu += s.cpu_seconds;
    if (!s.prefill && s.committed > 0) cheapest_cpu_per_token = std::min(cheapest_cpu_per_token, s.cpu_seconds / s.committed);
  }
  // The step's own share per sequence, beyond the forward and the sequences' own time.
  const double step_share = forward.step_seconds > 0 ? std::max(0.0, forward.step_seconds - forward.seconds - cpu) / n : 0.0;
  LearnArStep(forward, step_share);
  const double ar_cpu = ar_cpu_samples_ > 0 ? ar_cpu_seconds_
                        : std::isfinite(cheapest_cpu_per_token) ? cheapest_cpu_per_token
                                                                : 0.0;
  // What AR pays per token around its forwards: as learnt, or this step's share (which a
  // mode that waits longer between its steps, for the grammar masks of its drafts, would
  // otherwise count to AR's debit once per token).
  const double ar_step_share = ar_step_samples_ > 0 ? std::min(ar_step_share_, step_share) : step_share;
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
    actual += s.cpu_seconds + step_share;
    ar_per_token += ar_cpu + ar_step_share;
    if (forward.lone_ar_step_seconds > 0 && forward.sequences.size() == 1) {
      // Alone: AR's steps as measured (ForwardReport::lone_ar_step_seconds), each with the
      // wait a lone AR step had before it, never more than this one's (a step that
      // delivers several tokens, or waits for its drafts' masks, waits longer).
      ar_per_token = forward.lone_ar_step_seconds +
                     (ar_gap_samples_ > 0 ? std::min(ar_gap_seconds_, forward.gap_seconds) : forward.gap_seconds);
    }
    const size_t m = static_cast<size_t>(s.mode);
    if (m >= totals_.size()) continue;
    // AR is AR's own baseline: exactly 1.
    ModeSeconds charge{actual, s.mode == DecodingMode::kAutoregressive ? actual : ar_per_token * s.committed};
    totals_[m].actual += charge.actual;
    totals_[m].ar_equivalent += charge.ar_equivalent;
    if (out != nullptr) {
      (*out)[m].actual += charge.actual;
      (*out)[m].ar_equivalent += charge.ar_equivalent;
    }
  }
}

}  // namespace crossreg
