#include "engine/decoding/logit_adjustments.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/request_fields.h"
#include "engine/field_violation.h"
#include "engine/status_macros.h"

namespace crossreg {

absl::Status LogitAdjustments::Validate(int vocab) const {
  RETURN_IF_ERROR(CheckFieldRange("sampling.presence_penalty", presence_penalty));
  RETURN_IF_ERROR(CheckFieldRange("sampling.frequency_penalty", frequency_penalty));
  RETURN_IF_ERROR(CheckFieldRange("sampling.repetition_penalty", repetition_penalty));
  if (logit_bias.size() > kMaxLogitBiasEntries) {
    return FieldViolation("sampling.logit_bias",
                          absl::StrCat("at most ", kMaxLogitBiasEntries, " entries, got ", logit_bias.size()));
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto& [token, bias] = logit_bias[i];
    const std::string element = absl::StrCat("[", token, "]");
    if (token < 0 || token >= vocab) {
      return FieldViolation(absl::StrCat("sampling.logit_bias", element),
                            absl::StrCat("token ", token, " outside the vocabulary [0, ", vocab, ")"));
    }
    RETURN_IF_ERROR(CheckFieldRange("sampling.logit_bias", bias, {}, element));
  }
  return absl::OkStatus();
}

TokenHistory::TokenHistory(absl::Span<const int32_t> prompt, absl::Span<const int32_t> generated) {
  for (int32_t t : prompt) ++prompt_[t];
  for (int32_t t : generated) ++generated_[t];
}

void TokenHistory::PushGenerated(int32_t token) { ++generated_[token]; }

void TokenHistory::PopGenerated(int32_t token) {
  auto it = generated_.find(token);
  if (it == generated_.end()) return;
  if (--it->second == 0) generated_.erase(it);
}

int TokenHistory::generated_count(int32_t token) const {
  auto it = generated_.find(token);
  return it == generated_.end() ? 0 : it->second;
}

bool TokenHistory::seen(int32_t token) const { return generated_.count(token) > 0 || prompt_.count(token) > 0; }

void TokenHistory::Apply(const LogitAdjustments& adjust, float* logits, int vocab) const {
  // The order of the reference implementations: repetition (on the raw logit), then
  // frequency and presence, then the bias.
  if (adjust.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t t) {
      if (t < 0 || t >= vocab) return;
      float& z = logits[t];
      z = z > 0.0f ? z / adjust.repetition_penalty : z * adjust.repetition_penalty;
    };
    for (const auto& [t, n] : prompt_) penalise(t);
    for (const auto& [t, n] : generated_) {
      if (prompt_.count(t) == 0) penalise(t);
    }
  }
  if (adjust.presence_penalty != 0.0f || adjust.frequency_penalty != 0.0f) {
    for (const auto& [t, n] : generated_) {
      if (t < 0 || t >= vocab) continue;
      logits[t] -= adjust.frequency_penalty * static_cast<float>(n) + adjust.presence_penalty;
    }
  }
  for (const auto& [t, bias] : adjust.logit_bias) logits[t] += bias;
}

}  // namespace crossreg
