// The honest speedup of a decoding mode: the time AR would have needed for the tokens
// the mode committed, on this server at the batch sizes it ran, divided by the time
// the mode's sequences actually consumed. Defined in docs/metrics.md; computed per
// forward from measurements only, so it drops below 1 whenever a mode is slower than
// AR would have been, alone or sharing batches with others.
//
// A forward's time is modelled as affine in its rows, T(R) = c0 + c1·R (a fixed part:
// weights and launch overheads, shared by the batch; a per-row part), taken from the
// scheduler's forward-cost model at that forward's shape (ForwardReport::fixed_seconds,
// per_row_seconds: the start-up cost curve calibrated by the forwards the server runs,
// the model adaptive gamma prices draft rows with). Each sequence of the batch is
// charged an equal share of c0 plus c1 per row it added; the charges are scaled to sum
// to the measured forward time. AR would have committed one token per forward with one
// row, so for the k tokens a sequence committed it would have been charged
// k·(c0/N + c1), scaled alike (N: sequences in the batch).
//
// The scheduler thread's time around the forward counts too: each sequence is charged
// its own measured planning and applying (SequenceForward::cpu_seconds: choosing γ',
// grammar masks, verification, detokenizing), and the rest of the step (batch planning,
// bookkeeping) as an equal share, like c0. AR would have paid that share per token, and
// per token the planning and applying of a one-row decode step, learnt from the one-row
// decode steps this server ran (before any, the cheapest per token in the forward at
// hand, which understates AR and so the speedup). The share of the rest AR pays per token
// is learnt likewise from forwards of one-row steps only, and never taken above the
// current step's: a mode that waits longer between steps (for its drafts' grammar masks)
// must not count that wait to AR once per token. A mode whose verification or masks
// cost more than its drafts save reads below 1, as the clock says.
//
// One sequence decoding alone is priced apart once the scheduler's calibration has timed
// its AR steps (ForwardReport::lone_ar_step_seconds): AR's tokens cost those steps, whole,
// plus the wait a lone AR step has before it (learnt like the share above, and never
// taken above the current step's). The affine model's shape is the start-up curve's, and a curve
// timed in a moment slower for one row than for five reads a lone n-gram step as cheaper
// against AR than the steps then run (on the default model it read 2.6× where n-gram ran
// 2.1× AR).
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "engine/decoding/decoding_config.h"
#include "scheduler/forward_report.h"

namespace crossreg {

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
  // Charges the forward (by rows alone when it carries no cost model); `out` (optional)
  // gets this forward's per-mode charges.
  void OnForward(const ForwardReport& forward, std::array<ModeSeconds, kNumDecodingModes>* out = nullptr);
  const std::array<ModeSeconds, kNumDecodingModes>& totals() const { return totals_; }
  // Planning and applying seconds of a one-row decode step, as learnt (0: none seen).
  double ar_cpu_seconds() const { return ar_cpu_seconds_; }

 private:
  // Learns from this forward's one-row decode sequences what AR pays around its forward:
  // its own planning and applying, and (when the whole forward is one-row steps) its share
  // of the rest of the step.
  void LearnArStep(const ForwardReport& forward, double step_share);
  std::array<ModeSeconds, kNumDecodingModes> totals_{};
  double ar_cpu_seconds_ = 0;
  long long ar_cpu_samples_ = 0;
  double ar_step_share_ = 0;
  long long ar_step_samples_ = 0;
  double ar_gap_seconds_ = 0;  // the wait before a lone one-row step
  long long ar_gap_samples_ = 0;
};

}  // namespace crossreg
