#include "engine/decoding/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace crossreg {
namespace {

// The k best of `values` (higher first, ties to the lower id), as (id, value).
std::vector<std::pair<int32_t, float>> TopK(const std::vector<float>& values, int k) {
  const int vocab = static_cast<int>(values.size());
  k = std::clamp(k, 0, vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) {
    const float va = values[static_cast<size_t>(a)], vb = values[static_cast<size_t>(b)];
    return va > vb || (va == vb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
  std::vector<std::pair<int32_t, float>> top;
  for (int i = 0; i < k; ++i) top.emplace_back(ids[static_cast<size_t>(i)], values[static_cast<size_t>(ids[static_cast<size_t>(i)])]);
  return top;
}

}  // namespace

const char* LogprobsModeName(LogprobsMode mode) { return mode == LogprobsMode::kRaw ? "raw" : "processed"; }

TokenLogprob LogprobFromLogits(const float* logits, int vocab, int32_t token, int top_k) {
  double max = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_z = max + std::log(sum);
  std::vector<float> lp(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) lp[static_cast<size_t>(i)] = static_cast<float>(logits[i] - log_z);
  TokenLogprob out;
  out.token = token;
  out.logprob = lp[static_cast<size_t>(token)];
  out.top = TopK(lp, top_k);
  return out;
}

TokenLogprob LogprobFromProbs(const float* probs, int vocab, int32_t token, int top_k) {
  std::vector<float> lp(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    lp[static_cast<size_t>(i)] = probs[i] > 0.0f ? static_cast<float>(std::log(static_cast<double>(probs[i])))
                                                 : -std::numeric_limits<float>::infinity();
  }
  TokenLogprob out;
  out.token = token;
  out.logprob = lp[static_cast<size_t>(token)];
  out.top = TopK(lp, top_k);
  return out;
}

}  // namespace crossreg
