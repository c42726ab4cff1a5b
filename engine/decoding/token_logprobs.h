// Log-probabilities of committed tokens, as the APIs return them: the chosen token's
// and the k most likely tokens' at its position. Every committed token's value comes
// from the control row that chose or verified it, so AR and every speculative mode
// report the same numbers for the same text.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace crossreg {

// What the numbers are the log of: the model's own distribution (log-softmax of the
// raw logits, before penalties, biases, temperature and cuts: what the anchor servers
// return by default), or the processed distribution P that sampling draws from and
// verification tests against (tokens the cuts removed read -inf; greedy is one-hot).
enum class LogprobsMode { kRaw, kProcessed };
const char* LogprobsModeName(LogprobsMode mode);  // "raw", "processed"

inline constexpr int kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the k most likely, most likely first (ties: lower id)
};

// From a row of logits: log-softmax in double, then the token's value and the top k.
TokenLogprob LogprobFromLogits(const float* logits, int vocab, int32_t token, int top_k);
// From a distribution (probabilities summing to 1): log of each; zero -> -inf.
TokenLogprob LogprobFromProbs(const float* probs, int vocab, int32_t token, int top_k);

}  // namespace crossreg
