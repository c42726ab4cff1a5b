#include "scheduler/speedup_accounting.h"

#include <algorithm>
#include <cmath>

namespace crossreg {

void SpeedupAccounting::OnForward(const ForwardReport& forward, std::array<ModeSeconds, kNumDecodingModes>* out) {
  if (out != nullptr) *out = {};
  if (forward.sequences.empty() || forward.rows <= 0) return;
  const double n = static_cast<double>(forward.sequences.size());
  const double c0 = forward.fixed_seconds, c1 = forward.per_row_seconds;
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
}

}  // namespace crossreg
