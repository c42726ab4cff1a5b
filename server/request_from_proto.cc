#include "server/request_from_proto.h"

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "server/request_limits.h"

namespace crossreg::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) { return FieldViolation(field, what); }

// structured_output into the request's grammar. A compiler's message starts with the
// constraint's kind and, for schemas, the path inside it ("json_schema.properties.a:
// ..."): that path, under structured_output, is the field named.
absl::Status ReadStructuredOutput(const v1::StructuredOutput& so, const RequestDefaults& defaults,
                                  GenerationRequest& r) {
  using grammar::ConstraintKind;
  ConstraintKind kind = ConstraintKind::kGbnf;
  std::string source;
  switch (so.constraint_case()) {
    case v1::StructuredOutput::kJsonSchema:
      kind = ConstraintKind::kJsonSchema;
      source = so.json_schema();
      break;
    case v1::StructuredOutput::kJsonObject:
      if (!so.json_object()) return absl::OkStatus();  // false: free text
      kind = ConstraintKind::kJsonObject;
      break;
    case v1::StructuredOutput::kGrammar:
      kind = ConstraintKind::kGbnf;
      source = so.grammar();
      break;
    case v1::StructuredOutput::kRegex:
      kind = ConstraintKind::kRegex;
      source = so.regex();
      break;
    case v1::StructuredOutput::CONSTRAINT_NOT_SET:
      return absl::OkStatus();
  }
  const std::string field = absl::StrCat("structured_output.", grammar::ConstraintKindName(kind));
  if (source.size() > kMaxConstraintBytes) {
    return Invalid(field, absl::StrCat("longer than ", kMaxConstraintBytes, " bytes"));
  }
  if (kind != ConstraintKind::kJsonObject && source.empty()) return Invalid(field, "empty");
  if (defaults.grammars == nullptr) {
    return FieldError(absl::StatusCode::kFailedPrecondition, field, "this server does not serve structured output");
  }
  auto constraint = defaults.grammars->Compile(kind, source);
  if (!constraint.ok()) {
    const absl::Status& s = constraint.status();
    if (s.code() != absl::StatusCode::kInvalidArgument) return s;
    const absl::string_view message = s.message();
    const size_t colon = message.find(": ");
    if (colon == absl::string_view::npos) return Invalid(field, message);
    // "json_schema.properties.a: what" -> field structured_output.json_schema.properties.a
    return Invalid(absl::StrCat("structured_output.", message.substr(0, colon)), message.substr(colon + 2));
  }
  r.grammar = *std::move(constraint);
  return absl::OkStatus();
}

absl::Status CheckRequestId(const std::string& id) {
  if (id.size() > kMaxRequestIdBytes) return Invalid("request_id", absl::StrCat("longer than ", kMaxRequestIdBytes, " bytes"));
  for (unsigned char c : id) {
    // Ids go into logs and metrics; control characters would corrupt them.
    if (c < 0x20 || c == 0x7f) return Invalid("request_id", "contains a control character");
  }
  return absl::OkStatus();
}

absl::Status PromptIds(const v1::GenerateRequest& request, const RequestDefaults& defaults,
                       std::vector<int32_t>& ids) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (request.text().empty()) return Invalid("prompt.text", "empty (give at least one character or use token_ids)");
      if (defaults.max_prompt_bytes > 0 && request.text().size() > defaults.max_prompt_bytes) {
        return PromptTooLong(request.text().size(), defaults.max_prompt_bytes);
      }
      ids = defaults.tokenizer->Encode(request.text(), /*add_special=*/true);
      if (ids.empty()) return Invalid("prompt.text", "tokenizes to no tokens");
      return absl::OkStatus();
    case v1::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      if (ids.empty()) return Invalid("prompt.token_ids", "empty (give at least one token id)");
      return absl::OkStatus();
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return Invalid("prompt", "not set (give prompt.text or prompt.token_ids)");
}

// The engine names its own fields (engine/decoding/generation_request.h); a few are
// spelled differently in the proto.
absl::Status InProtoTerms(const absl::Status& s, const v1::GenerateRequest& request) {
  const std::string prompt_field = request.prompt_case() == v1::GenerateRequest::kTokenIds ? "prompt.token_ids" : "prompt";
  return RenameField(s, {{"prompt_ids", prompt_field}, {"max_new_tokens", "sampling.max_tokens"}});
}

}  // namespace

absl::Status PromptTooLong(size_t bytes, size_t limit) {
  return Invalid("prompt.text", absl::StrCat(bytes, " bytes, more than the ", limit,
                                             " this server accepts (more than could fit the model's context)"));
}

size_t PromptByteBound(const Tokenizer& tokenizer, int64_t context_length) {
  size_t longest = 4;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) longest = std::max(longest, tokenizer.TokenBytes(id).size());
  return longest * static_cast<size_t>(std::max<int64_t>(context_length, 1));
}

uint64_t DrawSeed() {
  // Any seed replays its text; below 2^53 it also survives JSON clients that hold
  // numbers as doubles (JavaScript), so the seed a reply reports can be sent back.
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return bits & ((uint64_t{1} << 53) - 1);
}

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

absl::StatusOr<ApiRequest> RequestFromProto(const v1::GenerateRequest& request, const DecodingEnvironment& env,
                                            const RequestDefaults& defaults) {
  ApiRequest out;
  GenerationRequest& r = out.request;
  if (auto s = CheckRequestId(request.request_id()); !s.ok()) return s;
  r.request_id = request.request_id();
  if (auto s = PromptIds(request, defaults, r.prompt_ids); !s.ok()) return s;

  const v1::SamplingParams& sp = request.sampling();
  r.sampling.temperature = sp.temperature();
  r.sampling.top_k = sp.top_k();
  r.sampling.top_p = sp.has_top_p() ? sp.top_p() : 1.0f;
  r.sampling.seed = sp.has_seed() ? sp.seed() : DrawSeed();
  r.max_new_tokens = sp.has_max_tokens() ? sp.max_tokens() : defaults.max_tokens;
  r.stop_at_eos = !sp.ignore_eos();
  r.sampling.min_p = sp.min_p();
  r.adjustments.presence_penalty = sp.presence_penalty();
  r.adjustments.frequency_penalty = sp.frequency_penalty();
  r.adjustments.repetition_penalty = sp.has_repetition_penalty() ? sp.repetition_penalty() : 1.0f;
  for (const auto& [token, bias] : sp.logit_bias()) r.adjustments.logit_bias.emplace_back(token, bias);
  // A map's order is unspecified: sorted, so a request means one thing.
  std::sort(r.adjustments.logit_bias.begin(), r.adjustments.logit_bias.end());
  if (sp.has_top_logprobs()) {
    if (sp.top_logprobs() < 0 || sp.top_logprobs() > kMaxTopLogprobs) {
      return Invalid("sampling.top_logprobs",
                     absl::StrCat("must be in [0, ", kMaxTopLogprobs, "], got ", sp.top_logprobs()));
    }
    r.logprobs = sp.top_logprobs();
  }
  if (!v1::LogprobsMode_IsValid(sp.logprobs_mode())) {
    return Invalid("sampling.logprobs_mode", absl::StrCat("unknown value ", static_cast<int>(sp.logprobs_mode()),
                                                           " (use RAW or PROCESSED)"));
  }
  r.logprobs_mode = sp.logprobs_mode() == v1::LOGPROBS_MODE_PROCESSED ? LogprobsMode::kProcessed : LogprobsMode::kRaw;
  r.skip_special_tokens = !sp.has_skip_special_tokens() || sp.skip_special_tokens();
  if (static_cast<size_t>(sp.stop_size()) > kMaxStopStrings) {
    return Invalid("sampling.stop", absl::StrCat("at most ", kMaxStopStrings, " stop sequences"));
  }
  for (const std::string& stop : sp.stop()) {
    if (stop.empty()) return Invalid("sampling.stop", "a stop sequence is empty");
    if (stop.size() > kMaxStopStringBytes) {
      return Invalid("sampling.stop", absl::StrCat("a stop sequence is longer than ", kMaxStopStringBytes, " bytes"));
    }
    out.request.stop_strings.push_back(stop);
  }

  const v1::DecodingParams& dp = request.decoding();
  if (!v1::DecodingMode_IsValid(dp.mode())) {
    return Invalid("decoding.mode", absl::StrCat("unknown value ", static_cast<int>(dp.mode()),
                                                 " (use AR, LOSSLESS, LOSSY or NGRAM)"));
  }
  DecodingConfig& d = r.decoding;
  d.mode = ToDecodingMode(dp.mode());
  d.beta = dp.beta();
  d.tau = dp.tau();
  d.gamma = dp.gamma() == 0 ? defaults.gamma : dp.gamma();
  d.fork_outcomes = dp.fork_outcomes();
  d.fork_depth = dp.fork_depth();
  d.ngram_assist = dp.ngram_assist();
  if (!v1::DraftLayout_IsValid(dp.draft_layout())) {
    return Invalid("decoding.draft_layout", absl::StrCat("unknown value ", static_cast<int>(dp.draft_layout()),
                                                         " (use CHAIN or BLOCKS)"));
  }
  switch (dp.draft_layout()) {
    case v1::DRAFT_LAYOUT_CHAIN: d.draft_layout = DraftLayout::kChain; break;
    case v1::DRAFT_LAYOUT_BLOCKS: d.draft_layout = DraftLayout::kBlocks; break;
    default:  // unset: the adapter's layout, for the modes that draft from it
      d.draft_layout = d.mode == DecodingMode::kLossless || d.mode == DecodingMode::kLossy ? defaults.draft_layout
                                                                                          : DraftLayout::kChain;
  }
  DefaultForkDepthToTrainedRows(d, defaults.block_rows);
  if (!v1::SampledVerification_IsValid(dp.sampled_verification())) {
    return Invalid("decoding.sampled_verification",
                   absl::StrCat("unknown value ", static_cast<int>(dp.sampled_verification()),
                                " (use SEED_EXACT, SEED_EXACT_ARGMAX or SPECULATIVE_SAMPLING)"));
  }
  switch (dp.sampled_verification()) {
    case v1::SAMPLED_VERIFICATION_SEED_EXACT_ARGMAX:
      d.sampled_verification = SampledVerification::kSeedExactArgmax;
      break;
    case v1::SAMPLED_VERIFICATION_SPECULATIVE_SAMPLING:
      d.sampled_verification = SampledVerification::kSpeculativeSampling;
      break;
    default:  // unset or SEED_EXACT
      d.sampled_verification = SampledVerification::kSeedExact;
      break;
  }
  d.adaptive_gamma = dp.has_adaptive_gamma() ? dp.adaptive_gamma()
                                             : defaults.adaptive_gamma && d.mode != DecodingMode::kAutoregressive;

  if (request.has_structured_output()) {
    if (auto s = ReadStructuredOutput(request.structured_output(), defaults, r); !s.ok()) return s;
  }

  if (auto s = ValidateGenerationRequest(r, env); !s.ok()) return InProtoTerms(s, request);
  return out;
}

}  // namespace crossreg::server
