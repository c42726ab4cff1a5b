// The measured cost curve T(rows) of one forward on a backend: what a draft row
// costs. ALGORITHM.md (PERFORMANCE): a speculative forward pays only if its tokens per
// forward exceed T(its rows) / T(1); on a GPU at batch 1 that ratio is near 1, on two
// CPU cores it grows almost linearly. The adaptive draft length reads this curve.
#pragma once

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/paged_kv_cache.h"

namespace crossreg {

class ForwardCostCurve {
 public:
  // (rows, seconds) points; rows >= 1 and distinct, seconds > 0. Sorted here.
  static absl::StatusOr<ForwardCostCurve> FromPoints(std::vector<std::pair<int, double>> points);

  // Times forwards of 1, 2, 4, ... up to `max_rows` rows (half control rows, half
  // predictive rows, the shape of a Cross-Regression step) on a scratch sequence with
  // `context` cached positions: one warm-up pass over all sizes, then the fastest of
  // `repeats` runs each (load from elsewhere only adds time), made non-decreasing. The
  // scratch sequence is freed; it needs context + max_rows positions of free KV.
  static absl::StatusOr<ForwardCostCurve> Measure(Backend& backend, PagedKvCache& kv, const ModelConfig& config,
                                                  int max_rows, int context = 64, int repeats = 5);

  // Seconds for `rows` rows: linear between measured points, extended linearly past
  // the last one (slope of the last two), flat below the first (and everywhere
  // when there is a single point).
  double Seconds(int rows) const;
  const std::vector<std::pair<int, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int, double>> points_;
};

}  // namespace crossreg
