// Percentiles of latency samples.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace crossreg::clients {

// Nearest-rank percentile (q in [0, 100]) of `values`, which it sorts; 0 when empty.
// Nearest rank returns an observed sample, never an interpolation between two.
inline double Percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q / 100.0 * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace crossreg::clients
