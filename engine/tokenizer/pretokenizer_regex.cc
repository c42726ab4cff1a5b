#include "engine/tokenizer/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace crossreg {
namespace {

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

pcre2_code* Code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

std::string_view PretokenizerPattern(TokenizerSpec::PreTokenizer kind) {
  switch (kind) {
    case TokenizerSpec::PreTokenizer::kLlama3:
      return kLlama3Pattern;
    case TokenizerSpec::PreTokenizer::kQwen2:
      return kQwen2Pattern;
    case TokenizerSpec::PreTokenizer::kGpt2:
    case TokenizerSpec::PreTokenizer::kDigitsGpt2:  // after the digits are split off
      break;
  }
  return kGpt2Pattern;
}

absl::StatusOr<std::unique_ptr<PretokenizerRegex>> PretokenizerRegex::Create(
    std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex does not compile at ",
                                                   error_offset, ": ",
                                                   reinterpret_cast<const char*>(message)));
  }
  // JIT is only a speed-up; the interpreter is used where it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<PretokenizerRegex>(new PretokenizerRegex(code));
}

PretokenizerRegex::~PretokenizerRegex() { pcre2_code_free(Code(code_)); }

std::vector<std::string_view> PretokenizerRegex::Split(std::string_view text) const {
  std::vector<std::string_view> words;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(Code(code_), nullptr);
  if (match == nullptr) {  // out of memory: keep the text whole rather than lose it
    if (!text.empty()) words.push_back(text);
    return words;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(Code(code_), subject, text.size(), offset, 0, match, nullptr);
    if (rc < 0) {  // no further match (or a matcher error): the rest is one word
      words.push_back(text.substr(offset));
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (start > offset) words.push_back(text.substr(offset, start - offset));
    if (end > start) {
      words.push_back(text.substr(start, end - start));
      offset = end;
    } else {
      // An empty match cannot happen with the known patterns; step one character on.
      const utf8::SequenceCheck c = utf8::CheckSequence(text.substr(start));
      const size_t step =
          c.kind == utf8::SequenceCheck::Kind::kComplete ? c.length : size_t{1};
      words.push_back(text.substr(start, step));
      offset = start + step;
    }
  }
  pcre2_match_data_free(match);
  return words;
}

}  // namespace crossreg
