// Penalties and biases on a control row's logits, from the tokens before that row:
// OpenAI's presence and frequency penalties (over the generated tokens), the Hugging
// Face repetition penalty (over prompt and generated tokens) and a per-token logit
// bias. They change the distribution P that sampling draws from and that lossless
// verification tests drafts against; a draft d_k is judged in the context of the
// committed tokens plus d_1 .. d_{k-1}, exactly as if those had been committed, so
// lossless stays exact with respect to the penalised distribution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace crossreg {

// Biases a request may set: a bias map is applied to every verified row.
inline constexpr size_t kMaxLogitBiasEntries = 1024;

struct LogitAdjustments {
  float presence_penalty = 0.0f;    // [-2, 2]: minus this from every token generated at least once
  float frequency_penalty = 0.0f;   // [-2, 2]: minus this times a token's count among the generated
  float repetition_penalty = 1.0f;  // > 0, 1 = off: tokens of prompt or output have positive logits
                                    // divided by it, negative ones multiplied
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit in [-100, 100])
  bool active() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f || !logit_bias.empty();
  }
  // Ranges, and bias tokens in [0, vocab). Messages start with the field
  // ("sampling.presence_penalty: ...", "sampling.logit_bias[<token id>]: ...").
  absl::Status Validate(int vocab) const;
};

// The tokens a row is judged after, as the adjustments need them: the prompt's and
// the generated tokens' ids, and each generated id's count. Drafts are pushed while a
// forward is verified and popped after.
class TokenHistory {
 public:
  TokenHistory() = default;
  TokenHistory(absl::Span<const int32_t> prompt, absl::Span<const int32_t> generated);
  void PushGenerated(int32_t token);
  void PopGenerated(int32_t token);  // undoes the matching PushGenerated
  int generated_count(int32_t token) const;
  bool seen(int32_t token) const;  // in the prompt or generated

  // logits[t] for every token the adjustments touch, in place.
  void Apply(const LogitAdjustments& adjust, float* logits, int vocab) const;

 private:
  std::unordered_map<int32_t, int> generated_;  // id -> count among the generated
  std::unordered_map<int32_t, int> prompt_;     // id -> count in the prompt
};

}  // namespace crossreg
