#include "server/http/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/decoding/token_logprobs.h"
#include "engine/decoding/logit_adjustments.h"
#include "engine/decoding/request_fields.h"
#include "engine/field_violation.h"
#include "engine/io/bounded_json.h"
#include "server/http/json_fields.h"
#include "server/request_limits.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "engine/status_macros.h"
#include "nlohmann/json.hpp"

namespace crossreg::server {
namespace {

// Ordered: a JSON schema keeps its `properties` order, which is the order the output writes them in.
using Json = nlohmann::ordered_json;

absl::Status Invalid(const std::string& field, const std::string& what) { return FieldViolation(field, what); }

// ---- field names --------------------------------------------------------------

// Top-level fields of both endpoints: those read below, the OpenAI options
// RefuseUnsupported turns down (a client setting them should hear why rather than be
// told they do not exist), and `user`, an end-user id for the provider's abuse
// monitoring that changes nothing in the output, so it is accepted and dropped.
constexpr absl::string_view kCommonFields[] = {
    "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop",
    "stream", "stream_options", "ignore_eos", "request_id", "return_token_ids", "user",
    "n", "best_of", "presence_penalty", "frequency_penalty", "echo", "logprobs", "top_logprobs",
    "logit_bias", "suffix", "tools", "functions", "response_format", "min_p", "repetition_penalty", "logprobs_mode",
    "skip_special_tokens", "grammar", "regex", "mode", "beta", "tau", "gamma", "fork_outcomes", "fork_depth", "ngram_assist", "adaptive_gamma", "draft_layout",
    "sampled_verification"};
constexpr absl::string_view kStreamOptionsFields[] = {"include_usage"};

absl::Status CheckTopLevelFields(const Json& body, OpenAiEndpoint endpoint) {
  // The other endpoint's prompt field is the likeliest unknown field of all: say where it goes.
  if (endpoint == OpenAiEndpoint::kCompletions && body.contains("messages")) {
    return Invalid("messages", "unknown field (/v1/completions takes prompt; messages go to /v1/chat/completions)");
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions && body.contains("prompt")) {
    return Invalid("prompt", "unknown field (/v1/chat/completions takes messages; a prompt goes to /v1/completions)");
  }
  std::vector<absl::string_view> known(std::begin(kCommonFields), std::end(kCommonFields));
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    known.insert(known.end(), {"messages", "tool_choice", "parallel_tool_calls", "function_call"});
  } else {
    known.push_back("prompt");
  }
  return CheckKnownFields(body, "", known);
}

// ---- values -------------------------------------------------------------------

// Doubles hold every integer below 2^53 exactly; from there on a float may no longer
// be the integer the client wrote.
constexpr double kMaxExactInteger = 9007199254740992.0;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool Has(const Json& body, const char* field) { return body.contains(field) && !body.at(field).is_null(); }

// A number that must be finite and fit the proto's float: a double beyond it would
// become infinity, one the engine names with a value the client never sent.
absl::StatusOr<float> Float(const Json& body, const char* field) {
  const Json& v = body.at(field);
  if (!v.is_number()) return Invalid(field, absl::StrCat("must be a number, got ", TypeName(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::abs(d) > std::numeric_limits<float>::max()) {
    return Invalid(field, absl::StrCat("out of range, got ", v.dump()));
  }
  return static_cast<float>(d);
}

// A number the request field table ranges (engine/decoding/request_fields.h): the
// engine's rule, checked on the float the engine will see (0.99999999999 is 1 there)
// and reported with the value as the client wrote it, named as the body names it.
absl::StatusOr<float> RangedFloat(const Json& body, const char* field, const char* path) {
  ASSIGN_OR_RETURN(const float v, Float(body, field));
  RETURN_IF_ERROR(RenameField(CheckFieldRange(path, v, body.at(field).dump()), {{path, field}}));
  return v;
}

// A whole number in [lo, hi], refused by name outside it (`range` says how, default
// "in [lo, hi]"). Floats without a fraction count as integers: clients that hold every
// number as a double send 5.0.
absl::StatusOr<int64_t> Integer(const Json& body, const char* field, int64_t lo, int64_t hi,
                                const std::string& range = "") {
  const Json& v = body.at(field);
  auto out_of_range = [&] {
    return Invalid(field, absl::StrCat("must be ", range.empty() ? absl::StrCat("in [", lo, ", ", hi, "]") : range,
                                       ", got ", v.dump()));
  };
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return out_of_range();
    }
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return out_of_range();
    return i;
  }
  if (!v.is_number()) return Invalid(field, absl::StrCat("must be an integer, got ", TypeName(v)));
  const double d = v.get<double>();
  if (d != std::floor(d)) return Invalid(field, absl::StrCat("must be an integer, got ", v.dump()));
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) return out_of_range();
  if (std::abs(d) >= kMaxExactInteger) {
    return Invalid(field, absl::StrCat("must be written as an integer (", v.dump(), " is not exact as a float)"));
  }
  return static_cast<int64_t>(d);
}

absl::StatusOr<bool> Bool(const Json& body, const char* field) { return BoolField(body.at(field), field); }

absl::StatusOr<v1::DecodingMode> ModeByName(const std::string& name) {
  if (name == "ar") return v1::DECODING_MODE_AR;
  if (name == "lossless") return v1::DECODING_MODE_LOSSLESS;
  if (name == "lossy") return v1::DECODING_MODE_LOSSY;
  if (name == "ngram") return v1::DECODING_MODE_NGRAM;
  return Invalid("mode", absl::StrCat("unknown mode \"", name, "\" (use ar, lossless, lossy or ngram)"));
}

// ---- the prompt -----------------------------------------------------------------

absl::Status ReadTokenIds(const Json& ids, v1::GenerateRequest& proto) {
  if (ids.empty()) return Invalid("prompt", "empty");
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& id = ids[i];
    const std::string field = absl::StrCat("prompt[", i, "]");
    if (!id.is_number_integer()) return Invalid(field, absl::StrCat("must be a token id, got ", TypeName(id)));
    const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() <= static_cast<uint64_t>(kInt32Max)
                                                  : id.get<int64_t>() >= std::numeric_limits<int32_t>::min();
    if (!in_range) return Invalid(field, absl::StrCat("token id out of range, got ", id.dump()));
    proto.mutable_token_ids()->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status ReadPrompt(const Json& body, v1::GenerateRequest& proto) {
  if (!body.contains("prompt")) return Invalid("prompt", "required (a string or an array of token ids)");
  const Json* prompt = &body.at("prompt");
  // A batch of one prompt is that prompt.
  if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    if (prompt->size() != 1) return Invalid("prompt", "one prompt per request (batches of prompts are not supported)");
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    proto.set_text(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (prompt->is_array()) return ReadTokenIds(*prompt, proto);
  return Invalid("prompt", absl::StrCat("must be a string or an array of token ids, got ", TypeName(*prompt)));
}

// ---- options --------------------------------------------------------------------

// Options crossreg does not implement: refused when set to anything but their default.
absl::Status RefuseUnsupported(const Json& body) {
  for (const char* field : {"n", "best_of"}) {
    if (!Has(body, field)) continue;
    const Json& v = body.at(field);
    if (!v.is_number()) return Invalid(field, absl::StrCat("must be 1, got ", TypeName(v)));
    if (v != 1) return Invalid(field, absl::StrCat("only ", field, " = 1 is supported, got ", v.dump()));
  }
  if (Has(body, "echo")) {
    const Json& v = body.at("echo");
    if (!v.is_boolean()) return Invalid("echo", absl::StrCat("must be false, got ", TypeName(v)));
    if (v.get<bool>()) return Invalid("echo", "not supported (the prompt is not returned)");
  }
  if (Has(body, "suffix")) return Invalid("suffix", "not supported");
  for (const char* field : {"functions", "function_call"}) {
    if (Has(body, field)) return Invalid(field, "not supported (OpenAI's deprecated form: use tools and tool_choice)");
  }
  return absl::OkStatus();
}

// Structured output: OpenAI's response_format ({"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict", "description"}}) and
// crossreg's `grammar` (GBNF) and `regex`; at most one of them.
absl::Status ReadStructuredOutput(const Json& body, v1::StructuredOutput& out) {
  const char* given = nullptr;
  for (const char* field : {"response_format", "grammar", "regex"}) {
    if (!Has(body, field)) continue;
    if (given != nullptr) {
      return Invalid(field, absl::StrCat("give one of response_format, grammar and regex (", given, " is set too)"));
    }
    given = field;
  }
  for (const char* field : {"grammar", "regex"}) {
    if (!Has(body, field)) continue;
    ASSIGN_OR_RETURN(const std::string text, StringField(body.at(field), field));
    if (text.empty()) return Invalid(field, "empty");
    if (field[0] == 'g') {
      out.set_grammar(text);
    } else {
      out.set_regex(text);
    }
  }
  if (!Has(body, "response_format")) return absl::OkStatus();
  const Json& rf = body.at("response_format");
  if (!rf.is_object()) return Invalid("response_format", absl::StrCat("must be an object, got ", TypeName(rf)));
  for (const auto& [key, value] : rf.items()) {
    if (key != "type" && key != "json_schema") {
      return Invalid(absl::StrCat("response_format.", JsonPathKey(key)), "unknown field");
    }
  }
  if (!Has(rf, "type")) return Invalid("response_format.type", "missing (\"text\", \"json_object\" or \"json_schema\")");
  ASSIGN_OR_RETURN(const std::string type, StringField(rf.at("type"), "response_format.type"));
  if (type != "json_schema" && Has(rf, "json_schema")) {
    return Invalid("response_format.json_schema", absl::StrCat("only with \"type\": \"json_schema\", not \"", type, "\""));
  }
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    out.set_json_object(true);
    return absl::OkStatus();
  }
  if (type != "json_schema") {
    return Invalid("response_format.type",
                   absl::StrCat("must be \"text\", \"json_object\" or \"json_schema\", got \"", type, "\""));
  }
  if (!Has(rf, "json_schema")) return Invalid("response_format.json_schema", "missing");
  const Json& js = rf.at("json_schema");
  if (!js.is_object()) {
    return Invalid("response_format.json_schema", absl::StrCat("must be an object, got ", TypeName(js)));
  }
  for (const auto& [key, value] : js.items()) {
    if (key == "name" || key == "description") {
      RETURN_IF_ERROR(StringField(value, absl::StrCat("response_format.json_schema.", key)).status());
    } else if (key == "strict") {
      // Output always follows the schema exactly where it is supported; a schema
      // using anything else is refused, strict or not.
      if (!value.is_boolean() && !value.is_null()) {
        return Invalid("response_format.json_schema.strict", absl::StrCat("must be a boolean, got ", TypeName(value)));
      }
    } else if (key != "schema") {
      return Invalid(absl::StrCat("response_format.json_schema.", JsonPathKey(key)), "unknown field");
    }
  }
  if (!Has(js, "schema")) return Invalid("response_format.json_schema.schema", "missing");
  const Json& schema = js.at("schema");
  if (!schema.is_object() && !schema.is_boolean()) {
    return Invalid("response_format.json_schema.schema", absl::StrCat("must be an object, got ", TypeName(schema)));
  }
  // The parse bounded the schema's depth, so this serialisation is linear and shallow;
  // its size is checked here, before any compiling, as gRPC checks the field's bytes.
  std::string text = schema.dump();
  if (text.size() > kMaxConstraintBytes) {
    return Invalid("response_format.json_schema.schema",
                   absl::StrCat(text.size(), " bytes, more than the ", kMaxConstraintBytes, " a schema may have"));
  }
  out.set_json_schema(std::move(text));
  return absl::OkStatus();
}

// Penalties, biases, min_p and log-probabilities (engine/decoding/logit_adjustments.h,
// token_logprobs.h); the ranges are the field table's.
absl::Status ReadAdjustments(const Json& body, OpenAiEndpoint endpoint, v1::SamplingParams& sp) {
  for (const char* field : {"presence_penalty", "frequency_penalty"}) {
    if (!Has(body, field)) continue;
    const bool presence = field[0] == 'p';
    ASSIGN_OR_RETURN(const float v,
                     RangedFloat(body, field, presence ? "sampling.presence_penalty" : "sampling.frequency_penalty"));
    if (presence) {
      sp.set_presence_penalty(v);
    } else {
      sp.set_frequency_penalty(v);
    }
  }
  if (Has(body, "repetition_penalty")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "repetition_penalty", "sampling.repetition_penalty"));
    sp.set_repetition_penalty(v);
  }
  if (Has(body, "min_p")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "min_p", "sampling.min_p"));
    sp.set_min_p(v);
  }
  if (Has(body, "logit_bias")) {
    const Json& bias = body.at("logit_bias");
    if (!bias.is_object()) {
      return Invalid("logit_bias", absl::StrCat("must be an object of token id -> bias, got ", TypeName(bias)));
    }
    if (bias.size() > kMaxLogitBiasEntries) {
      return Invalid("logit_bias", absl::StrCat("at most ", kMaxLogitBiasEntries, " entries, got ", bias.size()));
    }
    for (auto it = bias.begin(); it != bias.end(); ++it) {
      const std::string field = absl::StrCat("logit_bias[", Json(it.key().substr(0, 16)).dump(), "]");
      int64_t token = -1;
      // Canonical decimal only ("5", never " 5", "05" or "+5"): two spellings of one id
      // would be two entries for one token, and the parser refuses duplicate keys.
      const std::string& key = it.key();
      const bool canonical = !key.empty() && key.size() <= 10 &&
                             std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                             (key.size() == 1 || key[0] != '0');
      if (!canonical || !absl::SimpleAtoi(key, &token) || token > kInt32Max) {
        return Invalid(field, "the key must be a token id written in decimal without sign, spaces or leading zeros");
      }
      if (!it.value().is_number()) return Invalid(field, absl::StrCat("must be a number, got ", TypeName(it.value())));
      const double v = it.value().get<double>();
      RETURN_IF_ERROR(
          RenameField(CheckFieldRange("sampling.logit_bias", v, it.value().dump()), {{"sampling.logit_bias", field}}));
      (*sp.mutable_logit_bias())[static_cast<int32_t>(token)] = static_cast<float>(v);
    }
  }
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  if (chat) {
    // Chat: logprobs is a switch, top_logprobs the count (it needs the switch).
    bool on = false;
    if (Has(body, "logprobs")) {
      ASSIGN_OR_RETURN(on, Bool(body, "logprobs"));
    }
    if (Has(body, "top_logprobs")) {
      ASSIGN_OR_RETURN(const int64_t k, Integer(body, "top_logprobs", 0, kMaxTopLogprobs));
      if (!on) return Invalid("top_logprobs", "needs \"logprobs\": true");
      sp.set_top_logprobs(static_cast<int32_t>(k));
    } else if (on) {
      sp.set_top_logprobs(0);
    }
  } else {
    // Completions: logprobs is the count of top tokens (0: the chosen token's only).
    if (Has(body, "top_logprobs")) {
      return Invalid("top_logprobs", "not a /v1/completions field: \"logprobs\": N asks for the top N");
    }
    if (Has(body, "logprobs")) {
      if (body.at("logprobs").is_boolean()) {
        return Invalid("logprobs", "on /v1/completions a count of top tokens in [0, 20], not a boolean");
      }
      ASSIGN_OR_RETURN(const int64_t k, Integer(body, "logprobs", 0, kMaxTopLogprobs));
      sp.set_top_logprobs(static_cast<int32_t>(k));
    }
  }
  if (Has(body, "logprobs_mode")) {
    ASSIGN_OR_RETURN(const std::string mode, StringField(body.at("logprobs_mode"), "logprobs_mode"));
    if (mode == "raw") {
      sp.set_logprobs_mode(v1::LOGPROBS_MODE_RAW);
    } else if (mode == "processed") {
      sp.set_logprobs_mode(v1::LOGPROBS_MODE_PROCESSED);
    } else {
      return Invalid("logprobs_mode", absl::StrCat("must be \"raw\" or \"processed\", got \"", mode, "\""));
    }
  }
  return absl::OkStatus();
}

// The field table's ranges, checked on the values as sent.
absl::Status ReadSamplingNumbers(const Json& body, v1::SamplingParams& sp) {
  sp.set_temperature(1.0f);  // OpenAI's default
  if (Has(body, "temperature")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "temperature", "sampling.temperature"));
    sp.set_temperature(v);
  }
  if (Has(body, "top_p")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "top_p", "sampling.top_p"));
    sp.set_top_p(v);
  }
  if (Has(body, "top_k")) {
    // vLLM spells "no cut" -1, the proto 0.
    ASSIGN_OR_RETURN(const int64_t v, Integer(body, "top_k", -1, kInt32Max, "in [-1, 2147483647] (-1 or 0: no cut)"));
    sp.set_top_k(v < 0 ? 0 : static_cast<int32_t>(v));
  }
  if (Has(body, "seed")) {
    const Json& seed = body.at("seed");
    if (seed.is_number_unsigned()) {
      sp.set_seed(seed.get<uint64_t>());  // all of uint64, the proto's type
    } else {
      ASSIGN_OR_RETURN(const int64_t v,
                       Integer(body, "seed", 0, std::numeric_limits<int64_t>::max(), "in [0, 18446744073709551615]"));
      sp.set_seed(static_cast<uint64_t>(v));
    }
  }
  // max_completion_tokens is the chat API's newer name for max_tokens.
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    if (!Has(body, field)) continue;
    ASSIGN_OR_RETURN(const int64_t v, Integer(body, field, 1, kInt32Max));
    if (sp.has_max_tokens() && sp.max_tokens() != v) {
      return Invalid(field, absl::StrCat("is ", v, " but max_tokens is ", sp.max_tokens(), " (give one of them)"));
    }
    sp.set_max_tokens(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const Json& body, v1::SamplingParams& sp) {
  RETURN_IF_ERROR(ReadSamplingNumbers(body, sp));
  if (Has(body, "stop")) {
    const Json& stop = body.at("stop");
    if (stop.is_string()) {
      sp.add_stop(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (size_t i = 0; i < stop.size(); ++i) {
        ASSIGN_OR_RETURN(std::string s, StringField(stop[i], absl::StrCat("stop[", i, "]")));
        sp.add_stop(std::move(s));
      }
    } else {
      return Invalid("stop", absl::StrCat("must be a string or an array of strings, got ", TypeName(stop)));
    }
  }
  if (Has(body, "ignore_eos")) {
    ASSIGN_OR_RETURN(const bool v, Bool(body, "ignore_eos"));
    sp.set_ignore_eos(v);
  }
  if (Has(body, "skip_special_tokens")) {
    ASSIGN_OR_RETURN(const bool v, Bool(body, "skip_special_tokens"));
    sp.set_skip_special_tokens(v);
  }
  return absl::OkStatus();
}

// What a request alone can tell of the decoding controls (engine/decoding/decoding_config.cc);
// the bounds that depend on the mode, on gamma or on the server (--max_gamma) are the
// engine's to check.
absl::Status ReadDecoding(const Json& body, v1::DecodingParams& dp) {
  if (Has(body, "mode")) {
    ASSIGN_OR_RETURN(const std::string name, StringField(body.at("mode"), "mode"));
    ASSIGN_OR_RETURN(const v1::DecodingMode mode, ModeByName(name));
    dp.set_mode(mode);
  }
  if (Has(body, "beta")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "beta", "decoding.beta"));
    dp.set_beta(v);
  }
  if (Has(body, "tau")) {
    ASSIGN_OR_RETURN(const float v, RangedFloat(body, "tau", "decoding.tau"));
    dp.set_tau(v);
  }
  for (const auto& [field, set] : std::initializer_list<std::pair<const char*, void (*)(v1::DecodingParams&, int32_t)>>{
           {"gamma", [](v1::DecodingParams& d, int32_t v) { d.set_gamma(v); }},
           {"fork_outcomes", [](v1::DecodingParams& d, int32_t v) { d.set_fork_outcomes(v); }},
           {"fork_depth", [](v1::DecodingParams& d, int32_t v) { d.set_fork_depth(v); }}}) {
    if (!Has(body, field)) continue;
    ASSIGN_OR_RETURN(const int64_t v, Integer(body, field, 0, kInt32Max));
    set(dp, static_cast<int32_t>(v));
  }
  if (Has(body, "ngram_assist")) {
    ASSIGN_OR_RETURN(const bool v, Bool(body, "ngram_assist"));
    dp.set_ngram_assist(v);
  }
  if (Has(body, "adaptive_gamma")) {
    ASSIGN_OR_RETURN(const bool v, Bool(body, "adaptive_gamma"));
    dp.set_adaptive_gamma(v);
  }
  if (Has(body, "draft_layout")) {
    ASSIGN_OR_RETURN(const std::string name, StringField(body.at("draft_layout"), "draft_layout"));
    if (name == "chain") {
      dp.set_draft_layout(v1::DRAFT_LAYOUT_CHAIN);
    } else if (name == "blocks") {
      dp.set_draft_layout(v1::DRAFT_LAYOUT_BLOCKS);
    } else {
      return Invalid("draft_layout", absl::StrCat("unknown draft layout \"", name.substr(0, 64), "\" (use chain or blocks)"));
    }
  }
  if (Has(body, "sampled_verification")) {
    // How a sampled lossless or n-gram request verifies (docs/algorithm.md, "Seed-exact
    // verification"); the proto's enum by its lower-case name.
    ASSIGN_OR_RETURN(const std::string name, StringField(body.at("sampled_verification"), "sampled_verification"));
    if (name == "seed_exact") {
      dp.set_sampled_verification(v1::SAMPLED_VERIFICATION_SEED_EXACT);
    } else if (name == "seed_exact_argmax") {
      dp.set_sampled_verification(v1::SAMPLED_VERIFICATION_SEED_EXACT_ARGMAX);
    } else if (name == "speculative_sampling") {
      dp.set_sampled_verification(v1::SAMPLED_VERIFICATION_SPECULATIVE_SAMPLING);
    } else {
      return Invalid("sampled_verification",
                     absl::StrCat("unknown rule \"", name.substr(0, 64),
                                  "\" (use seed_exact, seed_exact_argmax or speculative_sampling)"));
    }
  }
  return absl::OkStatus();
}

// model, stream, stream_options, return_token_ids, request_id: how the request is
// served rather than what it generates.
absl::Status ReadServing(const Json& body, bool strict, OpenAiRequest& out) {
  if (Has(body, "model")) {
    ASSIGN_OR_RETURN(out.model, StringField(body.at("model"), "model"));
  }
  if (Has(body, "stream")) {
    ASSIGN_OR_RETURN(out.stream, Bool(body, "stream"));
  }
  if (Has(body, "stream_options")) {
    // As OpenAI: options for a stream that is not asked for are a mistake, not a no-op.
    if (!out.stream) return Invalid("stream_options", "only allowed when stream is true");
    const Json& options = body.at("stream_options");
    if (!options.is_object()) {
      return Invalid("stream_options", absl::StrCat("must be an object, got ", TypeName(options)));
    }
    if (strict) RETURN_IF_ERROR(CheckKnownFields(options, "stream_options.", kStreamOptionsFields));
    if (options.contains("include_usage")) {
      const Json& include_usage = options.at("include_usage");
      if (!include_usage.is_boolean()) {
        return Invalid("stream_options.include_usage",
                       absl::StrCat("must be true or false, got ", TypeName(include_usage)));
      }
      out.include_usage = include_usage.get<bool>();
    }
  }
  if (Has(body, "return_token_ids")) {
    ASSIGN_OR_RETURN(out.return_token_ids, Bool(body, "return_token_ids"));
  }
  if (Has(body, "request_id")) {
    ASSIGN_OR_RETURN(const std::string id, StringField(body.at("request_id"), "request_id"));
    out.proto.set_request_id(id);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const std::string& body_text, OpenAiEndpoint endpoint,
                                                 const OpenAiParseOptions& options) {
  // Bounded while parsing (depth, members, elements): nothing below recurses over or
  // searches through more than the limits let in.
  ASSIGN_OR_RETURN(const Json body, ParseBoundedJson(body_text, kRequestJsonLimits));
  if (!body.is_object()) return FieldViolation("body", "must be a JSON object");
  const bool strict = !options.ignore_unknown_fields;
  // Unknown fields first: a misspelt field is the likeliest reason anything else looks wrong.
  if (strict) RETURN_IF_ERROR(CheckTopLevelFields(body, endpoint));
  OpenAiRequest out;
  out.endpoint = endpoint;
  RETURN_IF_ERROR(RefuseUnsupported(body));
  if (endpoint == OpenAiEndpoint::kCompletions) {
    for (const char* field : {"tools", "tool_choice", "parallel_tool_calls"}) {
      if (Has(body, field)) return Invalid(field, "not a /v1/completions field (tools go to /v1/chat/completions)");
    }
  }
  RETURN_IF_ERROR(ReadServing(body, strict, out));
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    RETURN_IF_ERROR(ReadChatRequest(body, strict, out.chat));
  } else {
    RETURN_IF_ERROR(ReadPrompt(body, out.proto));
  }
  RETURN_IF_ERROR(ReadSampling(body, *out.proto.mutable_sampling()));
  RETURN_IF_ERROR(ReadAdjustments(body, endpoint, *out.proto.mutable_sampling()));
  RETURN_IF_ERROR(ReadDecoding(body, *out.proto.mutable_decoding()));
  v1::StructuredOutput structured;
  RETURN_IF_ERROR(ReadStructuredOutput(body, structured));
  if (structured.constraint_case() != v1::StructuredOutput::CONSTRAINT_NOT_SET) {
    *out.proto.mutable_structured_output() = std::move(structured);
  }
  return out;
}

absl::Status InJsonTerms(const absl::Status& status, OpenAiEndpoint endpoint) {
  return RenameField(status, JsonFieldNames(endpoint == OpenAiEndpoint::kChatCompletions));
}

}  // namespace crossreg::server
