#include "engine/decoding/forward_cost_curve.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace crossreg {

absl::StatusOr<ForwardCostCurve> ForwardCostCurve::FromPoints(std::vector<std::pair<int, double>> points) {
  if (points.empty()) return absl::InvalidArgumentError("cost curve: no points");
  std::sort(points.begin(), points.end());
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].first < 1 || !(points[i].second > 0.0)) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve: point (", points[i].first, " rows, ",
                                                     points[i].second, " s) needs rows >= 1 and seconds > 0"));
    }
    if (i > 0 && points[i].first == points[i - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve: two points for ", points[i].first, " rows"));
    }
  }
  ForwardCostCurve curve;
  curve.points_ = std::move(points);
  return curve;
}

absl::StatusOr<ForwardCostCurve> ForwardCostCurve::Measure(Backend& backend, PagedKvCache& kv,
                                                           const ModelConfig& config, int max_rows, int context,
                                                           int repeats) {
  if (max_rows < 1 || context < 1 || repeats < 1) {
    return absl::InvalidArgumentError("cost curve: max_rows, context and repeats must be >= 1");
  }
  if (context + max_rows > config.max_position) {
    return absl::InvalidArgumentError(absl::StrCat("cost curve: ", context, " + ", max_rows,
                                                   " positions exceed the context length ", config.max_position));
  }
  const SequenceId seq = kv.CreateSequence();
  struct Guard {
    PagedKvCache& kv;
    SequenceId seq;
    ~Guard() { kv.Free(seq); }
  } guard{kv, seq};
  auto token = [&](int i) { return static_cast<int32_t>((i * 7919 + 13) % config.vocab_size); };
  ForwardBatch batch;
  std::vector<float> logits;
  for (int p = 0; p < context; ++p) batch.rows.push_back({.seq = seq, .position = p, .token = token(p)});
  if (auto s = backend.Forward(batch, kv, logits); !s.ok()) return s;

  std::vector<int> sizes;
  for (int rows = 1;; rows = std::min(rows * 2, max_rows)) {
    sizes.push_back(rows);
    if (rows == max_rows) break;
  }
  auto time_forward = [&](int rows) -> absl::StatusOr<double> {
    batch.rows.clear();
    const int control = (rows + 1) / 2;
    for (int i = 0; i < control; ++i)
      batch.rows.push_back({.seq = seq, .position = context + i, .token = token(context + i), .want_logits = true});
    for (int i = 0; i < rows - control; ++i)
      batch.rows.push_back(
          {.seq = seq, .position = context + i, .token = token(context + i), .want_logits = true, .predictive = true});
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = backend.Forward(batch, kv, logits); !s.ok()) return s;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (auto s = kv.Truncate(seq, context); !s.ok()) return s;
    return seconds;
  };
  // Warm caches, allocations and worker threads on every size first, then take the
  // fastest of `repeats` runs per size: other load on the machine only adds time.
  for (int rows : sizes) {
    if (auto t = time_forward(rows); !t.ok()) return t.status();
  }
  std::vector<std::pair<int, double>> points;
  for (int rows : sizes) {
    double best = 0.0;
    for (int r = 0; r < repeats; ++r) {
      auto t = time_forward(rows);
      if (!t.ok()) return t.status();
      best = r == 0 ? *t : std::min(best, *t);
    }
    // More rows never cost less: a dip is noise.
    if (!points.empty()) best = std::max(best, points.back().second);
    points.emplace_back(rows, std::max(best, 1e-9));
  }
  return FromPoints(std::move(points));
}

double ForwardCostCurve::Seconds(int rows) const {
  const auto& p = points_;
  if (rows <= p.front().first || p.size() == 1) return p.front().second;  // one point: no slope known
  size_t hi = 1;
  while (hi + 1 < p.size() && p[hi].first < rows) ++hi;
  const auto [r0, t0] = p[hi - 1];
  const auto [r1, t1] = p[hi];
  const double slope = (t1 - t0) / (r1 - r0);
  return std::max(t0 + slope * (rows - r0), 1e-12);
}

}  // namespace crossreg
