#include "engine/decoding/forward_cost_curve.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace crossreg {

namespace {

absl::Status SortAndCheck(ForwardCostCurve::Points& points, const char* what) {
  std::sort(points.begin(), points.end());
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].first < 1 || !(points[i].second > 0.0)) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve: ", what, " point (", points[i].first, " rows, ",
                                                     points[i].second, " s) needs rows >= 1 and seconds > 0"));
    }
    if (i > 0 && points[i].first == points[i - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat("cost curve: two ", what, " points for ", points[i].first,
                                                     " rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ForwardCostCurve> ForwardCostCurve::FromPoints(Points points, Points control) {
  if (points.empty()) return absl::InvalidArgumentError("cost curve: no points");
  if (auto s = SortAndCheck(points, "Cross-Regression"); !s.ok()) return s;
  if (auto s = SortAndCheck(control, "control-only"); !s.ok()) return s;
  ForwardCostCurve curve;
  curve.points_ = std::move(points);
  curve.control_ = std::move(control);
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
  ForwardOutput out;
  for (int p = 0; p < context; ++p) batch.rows.push_back({.seq = seq, .position = p, .token = token(p)});
  if (auto s = backend.Forward(batch, kv, out); !s.ok()) return s;

  std::vector<int> sizes;
  for (int rows = 1;; rows = std::min(rows * 2, max_rows)) {
    sizes.push_back(rows);
    if (rows == max_rows) break;
  }
  // `all_control`: every row a control row (an n-gram step); else half predictive.
  auto time_forward = [&](int rows, bool all_control) -> absl::StatusOr<double> {
    batch.rows.clear();
    const int control = all_control ? rows : (rows + 1) / 2;
    for (int i = 0; i < control; ++i)
      batch.rows.push_back({.seq = seq, .position = context + i, .token = token(context + i), .want_logits = true});
    for (int i = 0; i < rows - control; ++i)
      batch.rows.push_back(
          {.seq = seq, .position = context + i, .token = token(context + i), .want_logits = true, .predictive = true});
    // Rolled back when it closes: the sequence keeps its `context` positions.
    KvTransaction transaction(kv);
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = backend.Execute(batch, transaction, out); !s.ok()) return s;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // A warm-up round (r = -1) over every size and shape, then the fastest of `repeats`
  // rounds (other load only adds time; rounds rather than runs back to back spread a burst
  // of load over the sizes). Rounds alternate rising and falling sizes: a forward can run
  // slower right after a much larger one (docs/benchmarks.md, "The programs"), so every
  // size is timed at least once after a smaller or equal forward.
  std::vector<std::array<double, 2>> best(sizes.size(), {1e300, 1e300});
  for (int r = -1; r < repeats; ++r) {
    for (size_t n = 0; n < sizes.size(); ++n) {
      const size_t i = r % 2 == 0 ? n : sizes.size() - 1 - n;
      for (int shape = 0; shape < 2; ++shape) {
        auto t = time_forward(sizes[i], shape == 1);
        if (!t.ok()) return t.status();
        if (r >= 0) best[i][shape] = std::min(best[i][shape], *t);
      }
    }
  }
  Points points, control;
  for (size_t i = 0; i < sizes.size(); ++i) {
    double cr = best[i][0], co = best[i][1];
    // More rows never cost less: a dip is noise. One row is the same forward in both shapes.
    if (sizes[i] == 1) cr = co = std::min(cr, co);
    if (!points.empty()) cr = std::max(cr, points.back().second);
    if (!control.empty()) co = std::max(co, control.back().second);
    points.emplace_back(sizes[i], std::max(cr, 1e-9));
    control.emplace_back(sizes[i], std::max(co, 1e-9));
  }
  return FromPoints(std::move(points), std::move(control));
}

double ForwardCostCurve::Interpolate(const Points& p, int rows) {
  if (rows <= p.front().first || p.size() == 1) return p.front().second;  // one point: no slope known
  size_t hi = 1;
  while (hi + 1 < p.size() && p[hi].first < rows) ++hi;
  size_t lo = hi - 1;
  if (rows > p.back().first) {
    // Past the last point (a busy forward: many sequences' rows), the slope of the last
    // doubling: Measure's sizes end 32, 33 for a 33-row widest forward, and one row's
    // difference is mostly timing noise.
    while (lo > 0 && 2 * p[lo].first > p[hi].first) --lo;
  }
  const auto [r0, t0] = p[lo];
  const auto [r1, t1] = p[hi];
  const double slope = (t1 - t0) / (r1 - r0);
  return std::max(t0 + slope * (rows - r0), 1e-12);
}

}  // namespace crossreg
