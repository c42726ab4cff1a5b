#include "engine/decoding/decoding_config.h"

#include <algorithm>
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

int MaxDecodeRows(const DecodingConfig& d) {
  switch (d.mode) {
    case DecodingMode::kAutoregressive: return 1;
    case DecodingMode::kNgram: return 1 + d.gamma;
    case DecodingMode::kLossless:
    case DecodingMode::kLossy:
      break;
  }
  if (!d.forked()) return 1 + 2 * d.gamma;  // m + 1 <= gamma control rows, gamma predictive
  const int f = d.ForkDepth();
  // Control [x_last, d_1..d_gamma], main chain plus its tail, one fork per outcome n < R.
  return (d.gamma + 1) + (d.gamma + 1 + f) + std::min(d.fork_outcomes, d.gamma) * f;
}

absl::Status ValidateDecodingConfig(const DecodingConfig& c, int max_gamma, bool has_adapter) {
  if (!std::isfinite(c.beta) || c.beta < 0.0f || c.beta >= 1.0f) {
    return absl::InvalidArgumentError(absl::StrCat("beta must be in [0, 1), got ", c.beta));
  }
  if (!std::isfinite(c.tau) || c.tau > 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat("tau must be <= 0 (nats), got ", c.tau));
  }
  const bool xr = c.mode == DecodingMode::kLossless || c.mode == DecodingMode::kLossy;
  if (!xr && (c.fork_outcomes != 0 || c.fork_depth != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("fork_outcomes/fork_depth apply to lossless and lossy modes; mode ",
                                                   DecodingModeName(c.mode), " needs 0"));
  }
  if (!xr && c.ngram_assist) {
    return absl::InvalidArgumentError(absl::StrCat("ngram_assist applies to lossless and lossy modes, not ",
                                                   DecodingModeName(c.mode),
                                                   c.mode == DecodingMode::kNgram ? " (it already drafts by n-gram)" : ""));
  }
  if (c.adaptive_gamma && c.mode == DecodingMode::kAutoregressive) {
    return absl::InvalidArgumentError("adaptive_gamma applies to speculative modes (lossless, lossy, ngram), not ar");
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
  if (c.fork_outcomes < 0 || c.fork_outcomes > c.gamma) {
    return absl::InvalidArgumentError(
        absl::StrCat("fork_outcomes must be in [0, gamma = ", c.gamma, "], got ", c.fork_outcomes));
  }
  if (c.fork_depth < 0 || c.fork_depth > max_gamma) {
    return absl::InvalidArgumentError(absl::StrCat("fork_depth must be in [0, ", max_gamma, "], got ", c.fork_depth));
  }
  if ((c.mode == DecodingMode::kLossless || c.mode == DecodingMode::kLossy) && !has_adapter) {
    return absl::FailedPreconditionError(absl::StrCat("mode ", DecodingModeName(c.mode),
                                                      " needs a Cross-Regression adapter (--adapter DIR)"));
  }
  return absl::OkStatus();
}

}  // namespace crossreg
