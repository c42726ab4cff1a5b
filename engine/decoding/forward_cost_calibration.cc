#include "engine/decoding/forward_cost_calibration.h"

#include <algorithm>
#include <cmath>

namespace crossreg {

namespace {
constexpr double kMaxRatio = 4.0;
}  // namespace

ForwardCostCalibration::ForwardCostCalibration(double weight) : weight_(std::clamp(weight, 1e-6, 1.0)) {}

void ForwardCostCalibration::Observe(const ForwardCostCurve& curve, int rows, int predictive_rows,
                                     bool carries_prefill, double seconds) {
  rows = std::max(1, rows);
  const double control_only = curve.Seconds(DecodingMode::kNgram, rows);
  const double half_predictive = curve.Seconds(rows);
  const double share = std::clamp(2.0 * predictive_rows / rows, 0.0, 1.0);
  const double predicted = control_only + share * (half_predictive - control_only);
  if (!(seconds > 0.0) || !(predicted > 0.0)) return;
  const double log_ratio = std::clamp(std::log(seconds / predicted), -std::log(kMaxRatio), std::log(kMaxRatio));
  Kind& k = carries_prefill ? with_prefill_ : decode_only_;
  ++k.forwards;
  // 1/n until that falls below `weight`: the first forwards average, later ones forget.
  const double w = std::max(weight_, 1.0 / static_cast<double>(k.forwards));
  k.log_scale += w * (log_ratio - k.log_scale);
}

double ForwardCostCalibration::Scale(bool carries_prefill) const {
  const Kind& k = carries_prefill ? with_prefill_ : decode_only_;
  return k.forwards == 0 ? 1.0 : std::exp(k.log_scale);
}

}  // namespace crossreg
