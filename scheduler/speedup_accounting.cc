#include "scheduler/speedup_accounting.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace crossreg {

namespace {
// The weight of a new one-row step in what AR's steps are learnt to cost, once 1/n falls below it.
constexpr double kArStepWeight = 0.01;
// ... and of a new all-AR forward in what such forwards of its batch size take: these
// follow the host's speed, which moves within minutes on a shared machine.
constexpr double kArForwardWeight = 0.05;
constexpr long long kMinArForwards = 3;  // all-AR forwards of a batch size before they price AR
}  // namespace

void SpeedupAccounting::LearntMean::Add(double x, double weight) {
  ++samples;
  value += std::max(weight, 1.0 / static_cast<double>(samples)) * (x - value);
}

void SpeedupAccounting::LearnArStep(const ForwardReport& forward, double step_share) {
  bool all_one_row = true;
  for (const SequenceForward& s : forward.sequences) {
    if (s.prefill || s.rows != 1 || s.committed != 1) {
      all_one_row = false;
      continue;
    }
    ar_cpu_.Add(s.cpu_seconds, kArStepWeight);
  }
  if (!all_one_row) return;
  if (forward.seconds > 0) ar_forward_by_batch_[forward.sequences.size()].Add(forward.seconds, kArForwardWeight);
  if (forward.step_seconds <= 0) return;
  ar_step_share_.Add(step_share, kArStepWeight);
  if (forward.sequences.size() == 1) ar_gap_.Add(forward.gap_seconds, kArStepWeight);
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
  const double ar_cpu = ar_cpu_.samples > 0                      ? ar_cpu_.value
                        : std::isfinite(cheapest_cpu_per_token) ? cheapest_cpu_per_token
                                                                : 0.0;
  // What AR pays per token around its forwards: as learnt, or this step's share (which a
  // mode that waits longer between its steps, for the grammar masks of its drafts, would
  // otherwise count to AR's debit once per token).
  const double ar_step_share = ar_step_share_.samples > 0 ? std::min(ar_step_share_.value, step_share) : step_share;
  // AR's forward at this batch size as measured, where all-AR forwards of it ran: the
  // model's shape is the start-up curve's, and a curve that reads wide forwards dearer
  // than they run prices AR's tokens too cheaply beside them (n-gram at 4 sequences read
  // about a fifth low).
  const bool decode_only = std::none_of(forward.sequences.begin(), forward.sequences.end(),
                                        [](const SequenceForward& s) { return s.prefill; });
  const auto measured = ar_forward_by_batch_.find(forward.sequences.size());
  const double ar_forward_per_token =
      decode_only && measured != ar_forward_by_batch_.end() && measured->second.samples >= kMinArForwards
          ? measured->second.value / n
          : 0.0;
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
    if (ar_forward_per_token > 0) ar_per_token = ar_forward_per_token;
    actual += s.cpu_seconds + step_share;
    ar_per_token += ar_cpu + ar_step_share;
    if (forward.lone_ar_step_seconds > 0 && forward.sequences.size() == 1) {
      // Alone: AR's steps as measured (ForwardReport::lone_ar_step_seconds), each with the
      // wait a lone AR step had before it, never more than this one's (a step that
      // delivers several tokens, or waits for its drafts' masks, waits longer).
      ar_per_token = forward.lone_ar_step_seconds +
                     (ar_gap_.samples > 0 ? std::min(ar_gap_.value, forward.gap_seconds) : forward.gap_seconds);
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
