#include "engine/decoding/draft_length_policy.h"

#include <algorithm>

namespace crossreg {

AcceptanceTracker::AcceptanceTracker(int max_depth, double decay)
    : decay_(decay), reached_(static_cast<size_t>(std::max(1, max_depth)), 0.0),
      accepted_(static_cast<size_t>(std::max(1, max_depth)), 0.0) {}

void AcceptanceTracker::Record(int depth, bool accepted) {
  if (depth < 1 || depth > static_cast<int>(reached_.size())) return;
  const size_t k = static_cast<size_t>(depth - 1);
  reached_[k] = decay_ * reached_[k] + 1.0;
  accepted_[k] = decay_ * accepted_[k] + (accepted ? 1.0 : 0.0);
}

double AcceptanceTracker::Rate(int depth) const {
  const int last = std::clamp(depth, 1, static_cast<int>(reached_.size()));
  double rate = 0.5;
  for (int k = 1; k <= last; ++k) rate = RateGivenPrior(k, rate);
  return rate;
}

double AcceptanceTracker::RateGivenPrior(int depth, double prior) const {
  const size_t k = static_cast<size_t>(depth - 1);
  return (accepted_[k] + 2.0 * prior) / (reached_[k] + 2.0);
}

AcceptanceTracker::Counts AcceptanceTracker::ScaledCounts(size_t k, double weight) const {
  if (k >= reached_.size() || reached_[k] <= 0.0) return {};
  const double scale = std::min(1.0, std::max(0.0, weight) / reached_[k]);
  return {reached_[k] * scale, accepted_[k] * scale};
}

void AcceptanceTracker::SeedFrom(const AcceptanceTracker& pooled, double weight) {
  for (size_t k = 0; k < reached_.size(); ++k) {
    const Counts seed = pooled.ScaledCounts(k, weight);
    if (seed.reached <= 0.0) continue;  // nothing pooled at this depth: keep the tracker's own
    reached_[k] = seed.reached;
    accepted_[k] = seed.accepted;
  }
}

void AcceptanceTracker::RevertToward(const AcceptanceTracker& pooled, double weight) {
  for (size_t k = 0; k < reached_.size(); ++k) {
    const Counts seed = pooled.ScaledCounts(k, weight);  // zero where the pool never reached: toward the prior
    reached_[k] = decay_ * reached_[k] + (1.0 - decay_) * seed.reached;
    accepted_[k] = decay_ * accepted_[k] + (1.0 - decay_) * seed.accepted;
  }
}

double AcceptanceTracker::Reached(int depth) const {
  if (depth < 1 || depth > static_cast<int>(reached_.size())) return 0.0;
  return reached_[static_cast<size_t>(depth - 1)];
}

double AcceptanceTracker::ExpectedTokens(int drafts) const {
  double expected = 1.0, reach = 1.0, rate = 0.5;
  for (int k = 1; k <= drafts; ++k) {
    if (k <= static_cast<int>(reached_.size())) rate = RateGivenPrior(k, rate);  // deeper: the deepest tracked
    reach *= rate;
    expected += reach;
  }
  return expected;
}

bool ProbeSchedule::Due(int first) const { return ar_streak + 1 >= std::max({interval, first, 1}); }

void ProbeSchedule::Count(int first, int cap, bool probed) {
  first = std::max(1, first);
  interval = std::max(interval, first);
  if (!probed) {
    ++ar_streak;
    return;
  }
  ar_streak = 0;
  interval = std::min(2 * interval, std::max(cap, first));
}

void ProbeSchedule::DraftsPay(int first) {
  ar_streak = 0;
  interval = std::max(1, first);
}

int DraftCapacity(const DecodingConfig& config, int gamma_prime) {
  if (gamma_prime <= 0 || config.mode == DecodingMode::kAutoregressive) return 0;
  if (config.mode == DecodingMode::kNgram || config.anchored()) return gamma_prime;
  return gamma_prime - 1;  // ALGORITHM.md's rows [x_last, d_1..d_{γ-1}]
}

DecodingConfig WithGamma(const DecodingConfig& config, int gamma_prime) {
  DecodingConfig d = config;
  if (gamma_prime <= 0) {
    d.mode = DecodingMode::kAutoregressive;
    d.fork_outcomes = 0;
    d.fork_depth = 0;
    return d;
  }
  d.gamma = gamma_prime;
  if (d.forked() || d.blocks()) {
    d.fork_depth = std::min(config.ForkDepth(), gamma_prime);
    d.fork_outcomes = std::min(config.fork_outcomes, gamma_prime);
  }
  return d;
}

DecodingConfig ForcedTextStep(const DecodingConfig& config, int drafts) {
  DecodingConfig d = config;
  d.mode = DecodingMode::kNgram;
  d.gamma = std::max(1, drafts);
  d.fork_outcomes = 0;
  d.fork_depth = 0;
  d.draft_layout = DraftLayout::kChain;
  d.ngram_assist = false;
  return d;
}

double DraftCost::DecodeSeconds(DecodingMode mode, int rows) const {
  return decode_shape.At(rows) * curve->Seconds(mode, rows);
}

double DraftCost::ArShare(DecodingMode mode, bool timed) const {
  const int b = std::max(1, batch_sequences);
  if (timed) return DecodeSeconds(mode, b) / b;
  return std::min(decode_scale * curve->Seconds(mode, b), forward_scale * curve->Seconds(mode, std::max(base_rows, b))) / b;
}

double DraftCost::MarginalSeconds(DecodingMode mode, int extra, bool timed) const {
  const int rows = std::max(base_rows, std::max(1, batch_sequences)) + std::max(0, planned_extra_rows);
  const int wider = rows + std::max(0, extra);
  if (timed) return std::max(0.0, DecodeSeconds(mode, wider) - DecodeSeconds(mode, rows));
  return std::min(1.0, forward_scale) * std::max(0.0, curve->Seconds(mode, wider) - curve->Seconds(mode, rows));
}

double DraftCost::Speedup(DecodingMode mode, double tokens, int extra) const {
  const auto priced = [&](bool timed) {
    const double share = ArShare(mode, timed);
    return tokens * share / (share + MarginalSeconds(mode, extra, timed));
  };
  if (!Shaped()) return priced(false);
  return TimedAlone() ? priced(true) : std::min(priced(true), priced(false));
}

int ChooseGamma(const DecodingConfig& config, const AcceptanceTracker& acceptance, const DraftCost& cost) {
  if (cost.curve == nullptr || config.mode == DecodingMode::kAutoregressive) return config.gamma;
  int best = 0;
  // AR: one token for this sequence's share of the all-AR forward. Drafts must beat it by
  // kDraftHurdle: the estimates of acceptance and of the margin both err, and where
  // drafting would gain a few percent at best an error either way turns it into a loss.
  // One sequence alone priced by its own timed steps (Shaped) needs no such margin.
  double best_speedup = cost.TimedAlone() ? 1.0 : kDraftHurdle;
  for (int g = 1; g <= config.gamma; ++g) {
    const int extra = MaxDecodeRows(WithGamma(config, g)) - 1;
    const double speedup = cost.Speedup(config.mode, acceptance.ExpectedTokens(DraftCapacity(config, g)), extra);
    if (speedup > best_speedup * 1.0001) {  // ties go to the cheaper choice
      best = g;
      best_speedup = speedup;
    }
  }
  return best;
}

}  // namespace crossreg
