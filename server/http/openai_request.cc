#include "server/http/openai_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace crossreg::server {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

const char* TypeName(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

absl::StatusOr<double> Number(const Json& body, const char* field) {
  const Json& v = body.at(field);
  if (!v.is_number()) return Invalid(field, absl::StrCat("must be a number, got ", TypeName(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) return Invalid(field, "must be finite");
  return d;
}

absl::StatusOr<int64_t> Integer(const Json& body, const char* field) {
  const Json& v = body.at(field);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9e15) return static_cast<int64_t>(d);
  }
  return Invalid(field, absl::StrCat("must be an integer, got ", TypeName(v)));
}

absl::StatusOr<int32_t> Int32(const Json& body, const char* field) {
  auto v = Integer(body, field);
  if (!v.ok()) return v.status();
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return Invalid(field, absl::StrCat("out of range, got ", *v));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<bool> Bool(const Json& body, const char* field) {
  const Json& v = body.at(field);
  if (!v.is_boolean()) return Invalid(field, absl::StrCat("must be true or false, got ", TypeName(v)));
  return v.get<bool>();
}

absl::StatusOr<std::string> String(const Json& v, const std::string& field) {
  if (!v.is_string()) return Invalid(field, absl::StrCat("must be a string, got ", TypeName(v)));
  return v.get<std::string>();
}

bool Has(const Json& body, const char* field) { return body.contains(field) && !body.at(field).is_null(); }

absl::StatusOr<v1::DecodingMode> ModeByName(const std::string& name) {
  if (name == "ar") return v1::DECODING_MODE_AR;
  if (name == "lossless") return v1::DECODING_MODE_LOSSLESS;
  if (name == "lossy") return v1::DECODING_MODE_LOSSY;
  if (name == "ngram") return v1::DECODING_MODE_NGRAM;
  return Invalid("mode", absl::StrCat("unknown mode \"", name, "\" (use ar, lossless, lossy or ngram)"));
}

// Chat message content: a string, or an array of {"type": "text", "text": ...} parts.
absl::StatusOr<std::string> MessageContent(const Json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) return Invalid(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_field = absl::StrCat(field, "[", i, "]");
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text")) {
      return Invalid(part_field, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    auto s = String(part.at("text"), part_field + ".text");
    if (!s.ok()) return s.status();
    text += *s;
  }
  return text;
}

absl::Status ReadMessages(const Json& body, OpenAiRequest& out) {
  if (!body.contains("messages")) return Invalid("messages", "required (an array of {role, content})");
  const Json& messages = body.at("messages");
  if (!messages.is_array() || messages.empty()) return Invalid("messages", "must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string field = absl::StrCat("messages[", i, "]");
    const Json& m = messages[i];
    if (!m.is_object()) return Invalid(field, "must be an object {role, content}");
    if (!m.contains("role")) return Invalid(field + ".role", "required");
    auto role = String(m.at("role"), field + ".role");
    if (!role.ok()) return role.status();
    if (*role != "system" && *role != "user" && *role != "assistant") {
      return Invalid(field + ".role", absl::StrCat("\"", *role, "\" is not supported (system, user or assistant)"));
    }
    auto content = MessageContent(m.contains("content") ? m.at("content") : Json(), field + ".content");
    if (!content.ok()) return content.status();
    out.messages.push_back({*role, *content});
  }
  return absl::OkStatus();
}

absl::Status ReadPrompt(const Json& body, v1::GenerateRequest& proto) {
  if (!body.contains("prompt")) return Invalid("prompt", "required (a string or an array of token ids)");
  const Json& prompt = body.at("prompt");
  if (prompt.is_string()) {
    proto.set_text(prompt.get<std::string>());
    return absl::OkStatus();
  }
  if (prompt.is_array()) {
    if (!prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
      if (prompt.size() != 1) return Invalid("prompt", "one prompt per request (batches of prompts are not supported)");
      return ReadPrompt(Json{{"prompt", prompt[0]}}, proto);
    }
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (!prompt[i].is_number_integer()) {
        return Invalid(absl::StrCat("prompt[", i, "]"), absl::StrCat("must be a token id, got ", TypeName(prompt[i])));
      }
      const int64_t id = prompt[i].get<int64_t>();
      if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max()) {
        return Invalid(absl::StrCat("prompt[", i, "]"), absl::StrCat("token id out of range, got ", id));
      }
      proto.mutable_token_ids()->add_ids(static_cast<int32_t>(id));
    }
    if (prompt.empty()) return Invalid("prompt", "empty");
    return absl::OkStatus();
  }
  return Invalid("prompt", absl::StrCat("must be a string or an array of token ids, got ", TypeName(prompt)));
}

// Options crossreg does not implement: refused when set to anything but their default.
absl::Status RefuseUnsupported(const Json& body) {
  if (Has(body, "n")) {
    auto n = Integer(body, "n");
    if (!n.ok()) return n.status();
    if (*n != 1) return Invalid("n", absl::StrCat("only n = 1 is supported, got ", *n));
  }
  if (Has(body, "best_of")) {
    auto b = Integer(body, "best_of");
    if (!b.ok()) return b.status();
    if (*b != 1) return Invalid("best_of", "only best_of = 1 is supported");
  }
  for (const char* field : {"presence_penalty", "frequency_penalty"}) {
    if (!Has(body, field)) continue;
    auto v = Number(body, field);
    if (!v.ok()) return v.status();
    if (*v != 0) return Invalid(field, "not supported (only 0)");
  }
  for (const char* field : {"echo", "logprobs"}) {
    if (!Has(body, field)) continue;
    const Json& v = body.at(field);
    if ((v.is_boolean() && v.get<bool>()) || (v.is_number() && v.get<double>() != 0)) {
      return Invalid(field, "not supported");
    }
  }
  for (const char* field : {"top_logprobs", "logit_bias", "suffix", "tools", "functions", "response_format"}) {
    if (Has(body, field)) return Invalid(field, "not supported");
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const Json& body, v1::SamplingParams& sp) {
  if (Has(body, "temperature")) {
    auto v = Number(body, "temperature");
    if (!v.ok()) return v.status();
    sp.set_temperature(static_cast<float>(*v));
  } else {
    sp.set_temperature(1.0f);  // OpenAI's default
  }
  if (Has(body, "top_p")) {
    auto v = Number(body, "top_p");
    if (!v.ok()) return v.status();
    sp.set_top_p(static_cast<float>(*v));
  }
  if (Has(body, "top_k")) {
    auto v = Int32(body, "top_k");
    if (!v.ok()) return v.status();
    sp.set_top_k(*v < 0 ? 0 : *v);  // vLLM spells "no cut" -1
  }
  if (Has(body, "seed")) {
    auto v = Integer(body, "seed");
    if (!v.ok()) return v.status();
    sp.set_seed(static_cast<uint64_t>(*v));
  }
  // max_completion_tokens is the chat API's newer name.
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    if (!Has(body, field)) continue;
    auto v = Int32(body, field);
    if (!v.ok()) return v.status();
    sp.set_max_tokens(*v);
  }
  if (Has(body, "stop")) {
    const Json& stop = body.at("stop");
    if (stop.is_string()) {
      sp.add_stop(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (size_t i = 0; i < stop.size(); ++i) {
        auto s = String(stop[i], absl::StrCat("stop[", i, "]"));
        if (!s.ok()) return s.status();
        sp.add_stop(*s);
      }
    } else {
      return Invalid("stop", absl::StrCat("must be a string or an array of strings, got ", TypeName(stop)));
    }
  }
  if (Has(body, "ignore_eos")) {
    auto v = Bool(body, "ignore_eos");
    if (!v.ok()) return v.status();
    sp.set_ignore_eos(*v);
  }
  return absl::OkStatus();
}

absl::Status ReadDecoding(const Json& body, v1::DecodingParams& dp) {
  if (Has(body, "mode")) {
    auto name = String(body.at("mode"), "mode");
    if (!name.ok()) return name.status();
    auto mode = ModeByName(*name);
    if (!mode.ok()) return mode.status();
    dp.set_mode(*mode);
  }
  for (const auto& [field, set] : std::initializer_list<std::pair<const char*, void (*)(v1::DecodingParams&, double)>>{
           {"beta", [](v1::DecodingParams& d, double v) { d.set_beta(static_cast<float>(v)); }},
           {"tau", [](v1::DecodingParams& d, double v) { d.set_tau(static_cast<float>(v)); }}}) {
    if (!Has(body, field)) continue;
    auto v = Number(body, field);
    if (!v.ok()) return v.status();
    set(dp, *v);
  }
  for (const auto& [field, set] : std::initializer_list<std::pair<const char*, void (*)(v1::DecodingParams&, int32_t)>>{
           {"gamma", [](v1::DecodingParams& d, int32_t v) { d.set_gamma(v); }},
           {"fork_outcomes", [](v1::DecodingParams& d, int32_t v) { d.set_fork_outcomes(v); }},
           {"fork_depth", [](v1::DecodingParams& d, int32_t v) { d.set_fork_depth(v); }}}) {
    if (!Has(body, field)) continue;
    auto v = Int32(body, field);
    if (!v.ok()) return v.status();
    set(dp, *v);
  }
  if (Has(body, "ngram_assist")) {
    auto v = Bool(body, "ngram_assist");
    if (!v.ok()) return v.status();
    dp.set_ngram_assist(*v);
  }
  if (Has(body, "adaptive_gamma")) {
    auto v = Bool(body, "adaptive_gamma");
    if (!v.ok()) return v.status();
    dp.set_adaptive_gamma(*v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const std::string& body_text, OpenAiEndpoint endpoint) {
  const Json body = Json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return absl::InvalidArgumentError("body: not valid JSON");
  if (!body.is_object()) return absl::InvalidArgumentError("body: must be a JSON object");
  OpenAiRequest out;
  out.endpoint = endpoint;
  if (Has(body, "model")) {
    auto model = String(body.at("model"), "model");
    if (!model.ok()) return model.status();
    out.model = *model;
  }
  if (auto s = RefuseUnsupported(body); !s.ok()) return s;
  if (Has(body, "stream")) {
    auto stream = Bool(body, "stream");
    if (!stream.ok()) return stream.status();
    out.stream = *stream;
  }
  if (Has(body, "stream_options")) {
    const Json& options = body.at("stream_options");
    if (!options.is_object()) return Invalid("stream_options", "must be an object");
    if (options.contains("include_usage")) {
      if (!options.at("include_usage").is_boolean()) return Invalid("stream_options.include_usage", "must be true or false");
      out.include_usage = options.at("include_usage").get<bool>();
    }
  }
  if (Has(body, "return_token_ids")) {
    auto v = Bool(body, "return_token_ids");
    if (!v.ok()) return v.status();
    out.return_token_ids = *v;
  }
  if (Has(body, "request_id")) {
    auto id = String(body.at("request_id"), "request_id");
    if (!id.ok()) return id.status();
    out.proto.set_request_id(*id);
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    if (auto s = ReadMessages(body, out); !s.ok()) return s;
  } else {
    if (auto s = ReadPrompt(body, out.proto); !s.ok()) return s;
  }
  if (auto s = ReadSampling(body, *out.proto.mutable_sampling()); !s.ok()) return s;
  if (auto s = ReadDecoding(body, *out.proto.mutable_decoding()); !s.ok()) return s;
  return out;
}

std::string InJsonTerms(const std::string& message, OpenAiEndpoint endpoint) {
  const std::string prompt = endpoint == OpenAiEndpoint::kChatCompletions ? "messages" : "prompt";
  const std::pair<const char*, std::string> renames[] = {
      {"sampling.max_tokens", "max_tokens"},   {"sampling.temperature", "temperature"},
      {"sampling.top_p", "top_p"},             {"sampling.top_k", "top_k"},
      {"sampling.stop", "stop"},               {"sampling.seed", "seed"},
      {"decoding.mode", "mode"},               {"decoding.beta", "beta"},
      {"decoding.tau", "tau"},                 {"decoding.gamma", "gamma"},
      {"decoding.fork_outcomes", "fork_outcomes"}, {"decoding.fork_depth", "fork_depth"},
      {"decoding.ngram_assist", "ngram_assist"},   {"decoding.adaptive_gamma", "adaptive_gamma"},
      {"prompt.token_ids", prompt},            {"prompt.text", prompt},
      {"prompt", prompt}};
  for (const auto& [proto_field, json_field] : renames) {
    if (absl::StartsWith(message, absl::StrCat(proto_field, ":")) ||
        absl::StartsWith(message, absl::StrCat(proto_field, "["))) {
      return json_field + message.substr(std::string(proto_field).size());
    }
  }
  return message;
}

}  // namespace crossreg::server
