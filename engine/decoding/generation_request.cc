#include "engine/decoding/generation_request.h"

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"

namespace crossreg {

absl::Status ValidateGenerationRequest(const GenerationRequest& request, const DecodingEnvironment& env) {
  const ModelConfig& config = *env.model;
  if (request.prompt_ids.empty()) return FieldViolation("prompt_ids", "empty (it needs at least one token)");
  if (static_cast<int64_t>(request.prompt_ids.size()) >= config.max_position) {
    return FieldViolation("prompt_ids", absl::StrCat(request.prompt_ids.size(), " tokens; the limit is ",
                                                     config.max_position - 1, " (the model's context length is ",
                                                     config.max_position, ")"));
  }
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= config.vocab_size) {
      return FieldViolation("prompt_ids", absl::StrCat("id ", id, " at index ", i, " is outside the vocabulary [0, ",
                                                       config.vocab_size, ")"));
    }
  }
  if (request.max_new_tokens < 1) {
    return FieldViolation("max_new_tokens", absl::StrCat("must be >= 1, got ", request.max_new_tokens));
  }
  for (int32_t id : request.stop_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return FieldViolation("stop_ids",
                            absl::StrCat("id ", id, " is outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  if (env.placeholder_token < 0 || env.placeholder_token >= config.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat("the adapter's placeholder token ", env.placeholder_token,
                                                      " is outside the vocabulary [0, ", config.vocab_size, ")"));
  }
  if (auto s = request.sampling.Validate(); !s.ok()) return s;
  if (auto s = request.adjustments.Validate(config.vocab_size); !s.ok()) return s;
  if (request.logprobs < -1 || request.logprobs > kMaxTopLogprobs) {
    return FieldViolation("logprobs", absl::StrCat("top log-probabilities must be in [0, ", kMaxTopLogprobs,
                                                   "] (-1: none), got ", request.logprobs));
  }
  return ValidateDecodingConfig(request.decoding, env.max_gamma, env.has_adapter, env.cost_curve != nullptr && env.adaptive_gamma);
}

int64_t DecodeHeadroom(const DecodingConfig& decoding) {
  return 1 + (decoding.mode == DecodingMode::kAutoregressive ? 0 : decoding.gamma);
}

}  // namespace crossreg
