// Pearson's chi-square goodness of fit, for the distribution tests of sampling.
#pragma once

#include <cstdint>
#include <vector>

namespace crossreg::testing {

struct ChiSquareResult {
  double statistic = 0;
  int degrees_of_freedom = 0;
  double p_value = 1;
  double total_variation = 0;  // ½ Σ |observed/n − expected probability|
  int pooled_cells = 0;        // cells with expected count < 5, merged into one
};

// observed[i] counts of n samples; probs[i] the exact probabilities (sum 1).
ChiSquareResult ChiSquareTest(const std::vector<int64_t>& observed, const std::vector<double>& probs);

// Upper tail of the chi-square distribution: P(X >= x) with k degrees of freedom.
double ChiSquareSurvival(double x, int k);

}  // namespace crossreg::testing
