#include "engine/decoding/decoding_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace crossreg {

const char* DecodingModeName(DecodingMode m) {
  switch (m) {
    case DecodingMode::kAutoregressive: return "ar";
    case DecodingMode::kLossless: return "lossless";
    case DecodingMode::kLossy: return "lossy";
    case DecodingMode::kNgram: return "ngram";
  }
  return "?";
}

absl::StatusOr<DecodingMode> ParseDecodingMode(const std::string& name) {
  if (name == "ar") return DecodingMode::kAutoregressive;
  if (name == "lossless") return DecodingMode::kLossless;
  if (name == "lossy") return DecodingMode::kLossy;
  if (name == "ngram") return DecodingMode::kNgram;
  return absl::InvalidArgumentError(
      absl::StrCat("mode: unknown decoding mode '", name, "' (ar, lossless, lossy or ngram)"));
}

absl::Status ValidateDecodingConfig(const DecodingConfig& c, int max_gamma, bool has_adapter) {
  if (!std::isfinite(c.beta) || c.beta < 0.0f || c.beta >= 1.0f) {
    return absl::InvalidArgumentError(absl::StrCat("beta must be in [0, 1), got ", c.beta));
  }
  if (!std::isfinite(c.tau) || c.tau > 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("tau must be <= 0 (nats), got ", c.tau));
  }
  const bool lossy_values = c.beta != 0.0f || c.tau != 0.0f;
  switch (c.mode) {
    case DecodingMode::kAutoregressive:
      if (lossy_values) return absl::InvalidArgumentError("beta/tau are lossy settings: use mode lossy, not ar");
      return absl::OkStatus();
    case DecodingMode::kLossless:
    case DecodingMode::kNgram:
      if (lossy_values) {
        return absl::InvalidArgumentError(absl::StrCat("beta/tau are lossy settings: mode ",
                                                       DecodingModeName(c.mode), " must keep beta = 0 and tau = 0"));
      }
      break;
    case DecodingMode::kLossy:
      break;
  }
  if (c.gamma < 1 || c.gamma > max_gamma) {
    return absl::InvalidArgumentError(absl::StrCat("gamma must be in [1, ", max_gamma, "], got ", c.gamma));
  }
  if (c.mode == DecodingMode::kNgram && c.ngram_max < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ngram_max must be >= 1, got ", c.ngram_max));
  }
  if ((c.mode == DecodingMode::kLossless || c.mode == DecodingMode::kLossy) && !has_adapter) {
    return absl::FailedPreconditionError(absl::StrCat("mode ", DecodingModeName(c.mode),
                                                      " needs a Cross-Regression adapter (--adapter DIR)"));
  }
  return absl::OkStatus();
}

}  // namespace crossreg
