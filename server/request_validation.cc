#include "server/request_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace crossreg::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

constexpr size_t kMaxRequestIdBytes = 256;
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 256;

absl::Status CheckRequestId(const std::string& id) {
  if (id.size() > kMaxRequestIdBytes) return Invalid("request_id", absl::StrCat("longer than ", kMaxRequestIdBytes, " bytes"));
  for (unsigned char c : id) {
    // Ids go into logs and metrics; control characters would corrupt them.
    if (c < 0x20 || c == 0x7f) return Invalid("request_id", "contains a control character");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> PromptIds(const v1::GenerateRequest& request, const RequestLimits& limits) {
  std::vector<int32_t> ids;
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (request.text().empty()) return Invalid("prompt.text", "empty (give at least one character or use token_ids)");
      ids = limits.tokenizer->Encode(request.text(), /*add_special=*/true);
      break;
    case v1::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      if (ids.empty()) return Invalid("prompt.token_ids", "empty (give at least one token id)");
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= limits.model->vocab_size) {
          return Invalid("prompt.token_ids", absl::StrCat("id ", ids[i], " at index ", i, " is outside the vocabulary [0, ",
                                                          limits.model->vocab_size, ")"));
        }
      }
      break;
    case v1::GenerateRequest::PROMPT_NOT_SET:
      return Invalid("prompt", "not set (give prompt.text or prompt.token_ids)");
  }
  if (ids.empty()) return Invalid("prompt", "tokenizes to no tokens");
  if (static_cast<int64_t>(ids.size()) >= limits.model->max_position) {
    return Invalid("prompt", absl::StrCat(ids.size(), " tokens; the limit is ", limits.model->max_position - 1,
                                          " (the model's context length is ", limits.model->max_position, ")"));
  }
  return ids;
}

absl::StatusOr<SamplingParams> Sampling(const v1::SamplingParams& in) {
  SamplingParams out;
  if (!std::isfinite(in.temperature()) || in.temperature() < 0) {
    return Invalid("sampling.temperature", absl::StrCat("must be >= 0, got ", in.temperature()));
  }
  if (in.top_k() < 0) return Invalid("sampling.top_k", absl::StrCat("must be >= 0, got ", in.top_k()));
  if (in.has_top_p() && !(in.top_p() > 0.0f && in.top_p() <= 1.0f)) {
    return Invalid("sampling.top_p", absl::StrCat("must be in (0, 1], got ", in.top_p()));
  }
  out.temperature = in.temperature();
  out.top_k = in.top_k();
  out.top_p = in.has_top_p() ? in.top_p() : 1.0f;
  out.seed = in.seed();
  // Backstop: the engine's own checks (the same ranges) must agree.
  if (auto s = out.Validate(); !s.ok()) return Invalid("sampling", s.message());
  return out;
}

absl::StatusOr<DecodingConfig> Decoding(const v1::DecodingParams& in, const RequestLimits& limits) {
  if (!v1::DecodingMode_IsValid(in.mode())) {
    return Invalid("decoding.mode", absl::StrCat("unknown value ", static_cast<int>(in.mode()),
                                                 " (use AR, LOSSLESS, LOSSY or NGRAM)"));
  }
  DecodingConfig out;
  out.mode = ToDecodingMode(in.mode());
  if (!std::isfinite(in.beta()) || in.beta() < 0.0f || in.beta() >= 1.0f) {
    return Invalid("decoding.beta", absl::StrCat("must be in [0, 1), got ", in.beta()));
  }
  if (!std::isfinite(in.tau()) || in.tau() > 0.0f) {
    return Invalid("decoding.tau", absl::StrCat("must be <= 0 (nats), got ", in.tau()));
  }
  if (out.mode != DecodingMode::kLossy) {
    if (in.beta() != 0.0f) {
      return Invalid("decoding.beta", absl::StrCat("is a lossy setting; mode ", DecodingModeName(out.mode), " needs 0"));
    }
    if (in.tau() != 0.0f) {
      return Invalid("decoding.tau", absl::StrCat("is a lossy setting; mode ", DecodingModeName(out.mode), " needs 0"));
    }
  }
  if (in.gamma() < 0 || in.gamma() > limits.max_gamma) {
    return Invalid("decoding.gamma",
                   absl::StrCat("must be in [1, ", limits.max_gamma, "] (0 = server default), got ", in.gamma()));
  }
  out.beta = in.beta();
  out.tau = in.tau();
  out.gamma = in.gamma() == 0 ? limits.default_gamma : in.gamma();
  out.fork_outcomes = in.fork_outcomes();
  out.fork_depth = in.fork_depth();
  out.ngram_assist = in.ngram_assist();
  out.adaptive_gamma = in.has_adaptive_gamma() ? in.adaptive_gamma()
                                               : limits.default_adaptive_gamma && out.mode != DecodingMode::kAutoregressive;
  if (out.adaptive_gamma && !limits.can_adapt_gamma) {
    return absl::FailedPreconditionError(
        "decoding.adaptive_gamma: this server has no forward cost curve (start it with --adaptive_gamma)");
  }
  if ((out.mode == DecodingMode::kLossless || out.mode == DecodingMode::kLossy) && !limits.has_adapter) {
    return absl::FailedPreconditionError(absl::StrCat("decoding.mode: ", DecodingModeName(out.mode),
                                                      " needs a Cross-Regression adapter; this server has none "
                                                      "(start it with --adapter)"));
  }
  if (auto s = ValidateDecodingConfig(out, limits.max_gamma, limits.has_adapter); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("decoding: ", s.message()));
  }
  return out;
}

}  // namespace

DecodingMode ToDecodingMode(v1::DecodingMode mode) {
  switch (mode) {
    case v1::DECODING_MODE_UNSPECIFIED:
    case v1::DECODING_MODE_AR:
      return DecodingMode::kAutoregressive;
    case v1::DECODING_MODE_LOSSLESS:
      return DecodingMode::kLossless;
    case v1::DECODING_MODE_LOSSY:
      return DecodingMode::kLossy;
    case v1::DECODING_MODE_NGRAM:
      return DecodingMode::kNgram;
    case v1::DecodingMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::DecodingMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return DecodingMode::kAutoregressive;  // unreachable after DecodingMode_IsValid
}

absl::StatusOr<ValidatedRequest> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                         const RequestLimits& limits) {
  ValidatedRequest out;
  RequestSpec& spec = out.spec;
  if (auto s = CheckRequestId(request.request_id()); !s.ok()) return s;
  spec.request_id = request.request_id();

  auto ids = PromptIds(request, limits);
  if (!ids.ok()) return ids.status();
  spec.prompt_ids = std::move(*ids);

  auto sampling = Sampling(request.sampling());
  if (!sampling.ok()) return sampling.status();
  spec.sampling = *sampling;

  const v1::SamplingParams& sp = request.sampling();
  if (sp.has_max_tokens() && sp.max_tokens() < 1) {
    return Invalid("sampling.max_tokens", absl::StrCat("must be >= 1, got ", sp.max_tokens()));
  }
  spec.max_new_tokens = sp.has_max_tokens() ? sp.max_tokens() : limits.default_max_tokens;
  spec.ignore_eos = sp.ignore_eos();
  if (static_cast<size_t>(sp.stop_size()) > kMaxStopStrings) {
    return Invalid("sampling.stop", absl::StrCat("at most ", kMaxStopStrings, " stop sequences"));
  }
  for (const std::string& stop : sp.stop()) {
    if (stop.empty()) return Invalid("sampling.stop", "a stop sequence is empty");
    if (stop.size() > kMaxStopStringBytes) {
      return Invalid("sampling.stop", absl::StrCat("a stop sequence is longer than ", kMaxStopStringBytes, " bytes"));
    }
    out.stop_strings.push_back(stop);
  }

  auto decoding = Decoding(request.decoding(), limits);
  if (!decoding.ok()) return decoding.status();
  spec.decoding = *decoding;
  return out;
}

}  // namespace crossreg::server
