// The measured cost curve T(rows) of one forward on a backend: what a draft row costs
// (ALGORITHM.md, PERFORMANCE: a speculative forward pays only if its tokens per forward
// exceed T(its rows) / T(1), near 1 on a GPU at batch 1, almost linear on two CPU
// cores). n-gram steps (control rows only, no adapter update) get a curve of their own.
#pragma once

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/decoding/decoding_config.h"
#include "engine/model/model_config.h"
#include "engine/kv/paged_kv_cache.h"

namespace crossreg {

class ForwardCostCurve {
 public:
  using Points = std::vector<std::pair<int, double>>;

  // (rows, seconds) points; rows >= 1 and distinct, seconds > 0. Sorted here. `points`
  // time Cross-Regression forwards; `control` (optional) forwards of control rows only
  // (n-gram's shape): without them n-gram steps are costed as Cross-Regression ones.
  static absl::StatusOr<ForwardCostCurve> FromPoints(Points points, Points control = {});

  // Times forwards of 1, 2, 4, ... up to `max_rows` rows on a scratch sequence with
  // `context` cached positions (freed after; it needs context + max_rows positions of
  // free KV), half predictive (a Cross-Regression step) and control rows only (n-gram):
  // the fastest of `repeats` rounds after a warm-up, made non-decreasing.
  static absl::StatusOr<ForwardCostCurve> Measure(Backend& backend, PagedKvCache& kv, const ModelConfig& config,
                                                  int max_rows, int context = 64, int repeats = 5);

  // Seconds for a Cross-Regression forward of `rows` rows: linear between measured
  // points, extended past the last one (the slope from the last point at or below half
  // its rows), flat below the first (and everywhere with a single point).
  double Seconds(int rows) const { return Interpolate(points_, rows); }
  // The same for a forward of `mode`'s shape: n-gram steps read the control-only points
  // when they were measured.
  double Seconds(DecodingMode mode, int rows) const {
    return Interpolate(mode == DecodingMode::kNgram && !control_.empty() ? control_ : points_, rows);
  }
  const Points& points() const { return points_; }
  const Points& control_points() const { return control_; }

 private:
  static double Interpolate(const Points& p, int rows);
  Points points_;
  Points control_;
};

}  // namespace crossreg
