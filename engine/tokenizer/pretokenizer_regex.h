// The regex that cuts text into words before byte-level BPE (PCRE2, UTF + UCP).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg {

// The pattern text each kind uses (as written in Hugging Face tokenizer.json files).
std::string_view PretokenizerPattern(TokenizerSpec::PreTokenizer kind);

class PretokenizerRegex {
 public:
  static absl::StatusOr<std::unique_ptr<PretokenizerRegex>> Create(std::string_view pattern);
  ~PretokenizerRegex();
  PretokenizerRegex(const PretokenizerRegex&) = delete;
  PretokenizerRegex& operator=(const PretokenizerRegex&) = delete;

  // Words of `text` in order. They cover all of it: text between matches (e.g. invalid
  // UTF-8, which never matches) becomes a word of its own. Thread-safe.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  explicit PretokenizerRegex(void* code) : code_(code) {}
  void* code_;  // pcre2_code_8*, kept opaque so callers need no PCRE2 header
};

}  // namespace crossreg
