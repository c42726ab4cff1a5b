#include "engine/decoding/forward_cost_calibration.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace crossreg {

namespace {
constexpr double kMaxRatio = 4.0;

// The curve's seconds for `rows` rows, `predictive_rows` predictive: the control-only
// points with none, the Cross-Regression points at half or more, linear in between.
double CurveSeconds(const ForwardCostCurve& curve, int rows, int predictive_rows) {
  rows = std::max(1, rows);
  const double control_only = curve.Seconds(DecodingMode::kNgram, rows);
  const double half_predictive = curve.Seconds(rows);
  const double share = std::clamp(2.0 * predictive_rows / rows, 0.0, 1.0);
  return control_only + share * (half_predictive - control_only);
}

// log(actual / curve) for a forward or step of this shape, clamped to ±log kMaxRatio;
// nothing when either figure is not positive.
std::optional<double> LogRatio(const ForwardCostCurve& curve, int rows, int predictive_rows, double seconds) {
  const double predicted = CurveSeconds(curve, rows, predictive_rows);
  if (!(seconds > 0.0) || !(predicted > 0.0)) return std::nullopt;
  return std::clamp(std::log(seconds / predicted), -std::log(kMaxRatio), std::log(kMaxRatio));
}
}  // namespace

ForwardCostCalibration::ForwardCostCalibration(double weight) : weight_(std::clamp(weight, 1e-6, 1.0)) {}

void ForwardCostCalibration::Observe(const ForwardCostCurve& curve, int rows, int predictive_rows,
                                     bool carries_prefill, double seconds) {
  if (const auto r = LogRatio(curve, rows, predictive_rows, seconds)) {
    (carries_prefill ? with_prefill_ : decode_only_).Add(*r, weight_);
  }
}

void ForwardCostCalibration::ObserveDecodeStep(const ForwardCostCurve& curve, int sequences, int rows,
                                               int predictive_rows, double seconds) {
  if (sequences < 1 || rows < sequences) return;
  if (const auto r = LogRatio(curve, rows, predictive_rows, seconds)) steps_[{sequences, rows}].Add(*r, weight_);
}

void ForwardCostCalibration::Kind::Add(double log_ratio, double weight) {
  ++forwards;
  // 1/n until that falls below `weight`: the first forwards average, later ones forget.
  const double w = std::max(weight, 1.0 / static_cast<double>(forwards));
  log_scale += w * (log_ratio - log_scale);
}

double ForwardCostCalibration::Scale(bool carries_prefill) const {
  const Kind& k = carries_prefill ? with_prefill_ : decode_only_;
  return k.forwards == 0 ? 1.0 : std::exp(k.log_scale);
}

DecodeScaleShape ForwardCostCalibration::DecodeShape(int sequences) const {
  DecodeScaleShape shape;
  // The map orders a batch size's steps by rows, its AR steps (rows == sequences) first.
  for (auto it = steps_.lower_bound({sequences, sequences}); it != steps_.end() && it->first.first == sequences; ++it) {
    if (it->second.forwards < kMinAnchorForwards) continue;
    if (shape.anchors.empty() && it->first.second != sequences) break;  // no AR anchor
    shape.anchors.push_back({it->first.second, std::exp(it->second.log_scale)});
  }
  if (!shape.known()) shape.anchors.clear();
  return shape;
}

double ForwardCostCalibration::DraftingStepScale() const {
  double log_sum = 0.0, steps = 0.0;
  for (auto it = steps_.upper_bound({1, 1}); it != steps_.end() && it->first.first == 1; ++it) {
    log_sum += static_cast<double>(it->second.forwards) * it->second.log_scale;
    steps += static_cast<double>(it->second.forwards);
  }
  return steps > 0.0 ? std::exp(log_sum / steps) : 1.0;
}

bool ForwardCostCalibration::WantsArStep(int sequences) const {
  const auto ar = steps_.find({sequences, sequences});
  if (ar != steps_.end() && ar->second.forwards >= kMinAnchorForwards) return false;
  for (auto it = steps_.upper_bound({sequences, sequences}); it != steps_.end() && it->first.first == sequences; ++it) {
    if (it->second.forwards >= kMinAnchorForwards) return true;
  }
  return false;
}

double DecodeScaleShape::At(double rows) const {
  if (!known()) return 1.0;
  if (rows <= anchors.front().rows) return anchors.front().scale;
  for (size_t i = 1; i < anchors.size(); ++i) {
    const Anchor& lo = anchors[i - 1];
    const Anchor& hi = anchors[i];
    if (rows <= hi.rows) return lo.scale + (rows - lo.rows) / (hi.rows - lo.rows) * (hi.scale - lo.scale);
  }
  return anchors.back().scale;
}

double ForwardCostCalibration::Predict(const ForwardCostCurve& curve, int rows, int predictive_rows,
                                       bool carries_prefill) const {
  return Scale(carries_prefill) * CurveSeconds(curve, rows, predictive_rows);
}

AffineCost ForwardCostCalibration::Affine(const ForwardCostCurve& curve, int rows, int predictive_rows,
                                          bool carries_prefill) const {
  rows = std::max(1, rows);
  // The chord keeps the predictive share of this forward.
  const double share = static_cast<double>(predictive_rows) / rows;
  const int far = std::max(2, rows);
  const double at_far = Predict(curve, far, static_cast<int>(share * far + 0.5), carries_prefill);
  const double at_one = Predict(curve, 1, 0, carries_prefill);
  AffineCost cost;
  cost.per_row = std::max(0.0, (at_far - at_one) / (far - 1));
  const double at_rows = Predict(curve, rows, predictive_rows, carries_prefill);
  cost.fixed = at_rows - cost.per_row * rows;
  if (cost.fixed < 0) cost = {0.0, at_rows / rows};
  return cost;
}

}  // namespace crossreg
