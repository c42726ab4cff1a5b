#include "tests/testing/chi_square.h"

#include <cmath>

namespace crossreg::testing {
namespace {

// Regularized lower incomplete gamma P(a, x) by its series (x < a + 1).
double GammaPSeries(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 10000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
  }
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Regularized upper incomplete gamma Q(a, x) by its continued fraction (x >= a + 1),
// evaluated with the modified Lentz method.
double GammaQFraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

}  // namespace

double ChiSquareSurvival(double x, int k) {
  if (x <= 0) return 1.0;
  const double a = k / 2.0, y = x / 2.0;
  return y < a + 1.0 ? 1.0 - GammaPSeries(a, y) : GammaQFraction(a, y);
}

ChiSquareResult ChiSquareTest(const std::vector<int64_t>& observed, const std::vector<double>& probs) {
  ChiSquareResult r;
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = probs[i] * static_cast<double>(n);
    r.total_variation += 0.5 * std::fabs(static_cast<double>(observed[i]) / n - probs[i]);
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += static_cast<double>(observed[i]);
      ++r.pooled_cells;
      continue;
    }
    r.statistic += (observed[i] - e) * (observed[i] - e) / e;
    ++cells;
  }
  if (pooled_expected > 0) {
    r.statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  r.degrees_of_freedom = cells - 1;
  r.p_value = ChiSquareSurvival(r.statistic, r.degrees_of_freedom);
  return r;
}

}  // namespace crossreg::testing
