#include "engine/decoding/decoding_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/request_fields.h"
#include "engine/field_violation.h"
#include "engine/status_macros.h"

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
  return FieldViolation("mode", absl::StrCat("unknown decoding mode '", name, "' (ar, lossless, lossy or ngram)"));
}

const char* DraftLayoutName(DraftLayout l) {
  switch (l) {
    case DraftLayout::kChain: return "chain";
    case DraftLayout::kBlocks: return "blocks";
  }
  return "?";
}

absl::StatusOr<DraftLayout> ParseDraftLayout(const std::string& name) {
  if (name == "chain") return DraftLayout::kChain;
  if (name == "blocks") return DraftLayout::kBlocks;
  return FieldViolation("draft_layout", absl::StrCat("unknown draft layout '", name, "' (chain or blocks)"));
}

const char* SampledVerificationName(SampledVerification v) {
  switch (v) {
    case SampledVerification::kSeedExact: return "seed_exact";
    case SampledVerification::kSeedExactArgmax: return "seed_exact_argmax";
    case SampledVerification::kSpeculativeSampling: return "speculative_sampling";
  }
  return "?";
}

absl::StatusOr<SampledVerification> ParseSampledVerification(const std::string& name) {
  if (name == "seed_exact") return SampledVerification::kSeedExact;
  if (name == "seed_exact_argmax") return SampledVerification::kSeedExactArgmax;
  if (name == "speculative_sampling") return SampledVerification::kSpeculativeSampling;
  return FieldViolation("sampled_verification",
                        absl::StrCat("unknown rule '", name,
                                     "' (seed_exact, seed_exact_argmax or speculative_sampling)"));
}

int MaxDecodeRows(const DecodingConfig& d) {
  switch (d.mode) {
    case DecodingMode::kAutoregressive: return 1;
    case DecodingMode::kNgram: return 1 + d.gamma;
    case DecodingMode::kLossless:
    case DecodingMode::kLossy:
      break;
  }
  if (d.blocks()) {
    // Control [x_last, d_1..d_gamma], one block per outcome with one.
    const int blocks = d.fork_outcomes == 0 ? d.gamma + 1 : std::min(d.fork_outcomes, d.gamma) + 1;
    return (d.gamma + 1) + blocks * d.ForkDepth();
  }
  if (!d.forked()) return 1 + 2 * d.gamma;  // m + 1 <= gamma control rows, gamma predictive
  const int f = d.ForkDepth();
  // Control [x_last, d_1..d_gamma], main chain plus its tail, one fork per outcome n < R.
  return (d.gamma + 1) + (d.gamma + 1 + f) + std::min(d.fork_outcomes, d.gamma) * f;
}

void DefaultForkDepthToTrainedRows(DecodingConfig& config, int block_rows) {
  if (config.fork_depth != 0 || !config.blocks() || block_rows <= 0 || config.gamma <= 0) return;
  config.fork_depth = std::min(config.gamma, block_rows);
}

absl::Status ValidateDecodingConfig(const DecodingConfig& c, int max_gamma, bool has_adapter, bool has_cost_curve) {
  auto invalid = [](absl::string_view field, auto&&... what) {
    return FieldViolation(absl::StrCat("decoding.", field), absl::StrCat(what...));
  };
  const char* mode = DecodingModeName(c.mode);
  const bool xr = c.mode == DecodingMode::kLossless || c.mode == DecodingMode::kLossy;
  RETURN_IF_ERROR(CheckFieldRange("decoding.beta", c.beta));
  RETURN_IF_ERROR(CheckFieldRange("decoding.tau", c.tau));
  if (c.mode != DecodingMode::kLossy) {
    if (c.beta != 0.0f) return invalid("beta", "is a lossy setting; mode ", mode, " needs 0");
    if (c.tau != 0.0f) return invalid("tau", "is a lossy setting; mode ", mode, " needs 0");
  }
  // AR ignores gamma, but a value no mode could use is still a mistake worth naming.
  if (c.gamma < 1 || c.gamma > max_gamma) return invalid("gamma", "must be in [1, ", max_gamma, "], got ", c.gamma);
  if (c.mode == DecodingMode::kAutoregressive && c.adaptive_gamma) {
    return invalid("adaptive_gamma", "applies to speculative modes (lossless, lossy, ngram), not ar");
  }
  if (!xr && c.fork_outcomes != 0) return invalid("fork_outcomes", "applies to lossless and lossy modes; mode ", mode, " needs 0");
  if (!xr && c.blocks()) return invalid("draft_layout", "blocks applies to lossless and lossy modes; mode ", mode, " needs chain");
  if (!xr && c.fork_depth != 0) return invalid("fork_depth", "applies to lossless and lossy modes; mode ", mode, " needs 0");
  if (!xr && c.ngram_assist) {
    return invalid("ngram_assist", "applies to lossless and lossy modes, not ", mode,
                   c.mode == DecodingMode::kNgram ? " (it already drafts by n-gram)" : "");
  }
  if (c.sampled_verification != SampledVerification::kSeedExact && c.mode != DecodingMode::kLossless &&
      c.mode != DecodingMode::kNgram) {
    return invalid("sampled_verification", "applies to lossless and ngram modes; mode ", mode,
                   c.mode == DecodingMode::kLossy ? " verifies by energy (beta, tau)" : " verifies nothing");
  }
  if (c.mode == DecodingMode::kNgram && c.ngram_max < 1) return invalid("ngram_max", "must be >= 1, got ", c.ngram_max);
  if (xr && (c.fork_outcomes < 0 || c.fork_outcomes > c.gamma)) {
    return invalid("fork_outcomes", "must be in [0, gamma = ", c.gamma, "], got ", c.fork_outcomes);
  }
  if (xr && (c.fork_depth < 0 || c.fork_depth > max_gamma)) {
    return invalid("fork_depth", "must be in [0, ", max_gamma, "], got ", c.fork_depth);
  }
  if (xr && !has_adapter) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "decoding.mode",
                      absl::StrCat(mode, " needs a Cross-Regression adapter, and none is loaded (start with --adapter DIR, "
                                                   "or serve a model that drafts for itself)"));
  }
  if (c.adaptive_gamma && !has_cost_curve) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "decoding.adaptive_gamma",
                      "needs a measured forward cost curve, and none was measured (start with --adaptive_gamma)");
  }
  return absl::OkStatus();
}

}  // namespace crossreg
