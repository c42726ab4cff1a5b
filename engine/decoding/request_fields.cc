#include "engine/decoding/request_fields.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"

namespace crossreg {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Order matters for renames only where one path is a prefix of another: the first
// match wins (RenameField), so "prompt.text" comes before "prompt".
constexpr RequestField kFields[] = {
    {"sampling.max_tokens", "max_tokens", "max_tokens", std::nullopt},
    {"sampling.temperature", "temperature", "temperature", FieldRange{0, kInf, false, false, "(0: greedy)"}},
    {"sampling.top_p", "top_p", "top_p", FieldRange{0, 1, true, false, {}}},
    {"sampling.top_k", "top_k", "top_k", FieldRange{0, kInf, false, false, "(0: no cut)"}},
    {"sampling.min_p", "min_p", "min_p", FieldRange{0, 1, false, false, {}}},
    {"sampling.stop", "stop", "stop", std::nullopt},
    {"sampling.seed", "seed", "seed", std::nullopt},
    {"sampling.presence_penalty", "presence_penalty", "presence_penalty", FieldRange{-2, 2, false, false, {}}},
    {"sampling.frequency_penalty", "frequency_penalty", "frequency_penalty", FieldRange{-2, 2, false, false, {}}},
    {"sampling.repetition_penalty", "repetition_penalty", "repetition_penalty",
     FieldRange{0, kInf, true, false, "(1: off)"}},
    {"sampling.logit_bias", "logit_bias", "logit_bias", FieldRange{-100, 100, false, false, {}}},
    {"sampling.top_logprobs", "logprobs", "top_logprobs", std::nullopt},
    {"logprobs", "logprobs", "top_logprobs", std::nullopt},
    {"sampling.logprobs_mode", "logprobs_mode", "logprobs_mode", std::nullopt},
    {"sampling.skip_special_tokens", "skip_special_tokens", "skip_special_tokens", std::nullopt},
    {"structured_output.json_schema", "response_format.json_schema.schema", "response_format.json_schema.schema",
     std::nullopt},
    {"structured_output.json_object", "response_format", "response_format", std::nullopt},
    {"structured_output.grammar", "grammar", "grammar", std::nullopt},
    {"structured_output.regex", "regex", "regex", std::nullopt},
    {"decoding.mode", "mode", "mode", std::nullopt},
    {"decoding.beta", "beta", "beta", FieldRange{0, 1, false, true, {}}},
    {"decoding.tau", "tau", "tau", FieldRange{-kInf, 0, false, false, "(nats)"}},
    {"decoding.gamma", "gamma", "gamma", std::nullopt},  // [1, the server's max_gamma]
    {"decoding.fork_outcomes", "fork_outcomes", "fork_outcomes", std::nullopt},
    {"decoding.fork_depth", "fork_depth", "fork_depth", std::nullopt},
    {"decoding.ngram_assist", "ngram_assist", "ngram_assist", std::nullopt},
    {"decoding.adaptive_gamma", "adaptive_gamma", "adaptive_gamma", std::nullopt},
    {"decoding.draft_layout", "draft_layout", "draft_layout", std::nullopt},
    {"decoding.sampled_verification", "sampled_verification", "sampled_verification", std::nullopt},
    {"prompt.token_ids", "prompt", "messages", std::nullopt},
    {"prompt.text", "prompt", "messages", std::nullopt},
    {"prompt", "prompt", "messages", std::nullopt},
};

// "in (0, 1]", ">= 0", "<= 0", "> 0".
std::string RuleText(const FieldRange& r) {
  const bool has_lo = std::isfinite(r.lo), has_hi = std::isfinite(r.hi);
  std::string rule;
  if (has_lo && has_hi) {
    rule = absl::StrCat("in ", r.lo_open ? "(" : "[", r.lo, ", ", r.hi, r.hi_open ? ")" : "]");
  } else if (has_lo) {
    rule = absl::StrCat(r.lo_open ? "> " : ">= ", r.lo);
  } else {
    rule = absl::StrCat(r.hi_open ? "< " : "<= ", r.hi);
  }
  return r.note.empty() ? rule : absl::StrCat(rule, " ", r.note);
}

bool Within(const FieldRange& r, double v) {
  if (!std::isfinite(v)) return false;
  const bool above_lo = r.lo_open ? v > r.lo : v >= r.lo;
  const bool below_hi = r.hi_open ? v < r.hi : v <= r.hi;
  return above_lo && below_hi;
}

}  // namespace

absl::Span<const RequestField> RequestFields() { return kFields; }

const RequestField* FindRequestField(absl::string_view path) {
  for (const RequestField& f : kFields) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

absl::Status CheckFieldRange(absl::string_view path, double value, absl::string_view as_sent,
                             absl::string_view element) {
  const RequestField* field = FindRequestField(path);
  // The table is the rule: a path without a range is a programming error, refused
  // loudly rather than passed.
  if (field == nullptr || !field->range.has_value()) {
    return absl::InternalError(absl::StrCat("request field ", path, " has no range in the field table"));
  }
  if (Within(*field->range, value)) return absl::OkStatus();
  return FieldViolation(absl::StrCat(path, element), absl::StrCat("must be ", RuleText(*field->range), ", got ",
                                           as_sent.empty() ? absl::StrCat(value) : std::string(as_sent)));
}

std::vector<std::pair<std::string, std::string>> JsonFieldNames(bool chat) {
  std::vector<std::pair<std::string, std::string>> renames;
  for (const RequestField& f : kFields) renames.emplace_back(f.path, chat ? f.chat : f.completions);
  return renames;
}

}  // namespace crossreg
