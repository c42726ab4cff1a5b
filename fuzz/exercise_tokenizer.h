// Builds a tokenizer from a fuzzed spec and runs it over SampleTexts(): every id it
// emits must lie in the vocabulary (a trap otherwise, which libFuzzer reports).
#pragma once

#include <algorithm>
#include <utility>

#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_input.h"

namespace crossreg::fuzz {

inline void ExerciseTokenizer(TokenizerSpec spec) {
  auto created = Tokenizer::Create(std::move(spec));
  if (!created.ok()) return;
  const Tokenizer& tokenizer = **created;
  for (std::string_view text : SampleTexts()) {
    for (bool parse_special : {false, true}) {
      const std::vector<int32_t> ids = tokenizer.Encode(text, /*add_special=*/true, parse_special);
      for (int32_t id : ids) {
        if (id < 0 || id >= tokenizer.vocab_size()) __builtin_trap();
      }
      (void)tokenizer.Decode(ids);
      StreamDecoder stream(tokenizer);
      for (int32_t id : ids) (void)stream.Push(id);
      (void)stream.Flush();
    }
  }
  // Every token's bytes, and ids outside the vocabulary (they decode to nothing).
  const int32_t n = std::min(tokenizer.vocab_size(), 4096);
  for (int32_t id = -1; id <= n; ++id) (void)tokenizer.TokenBytes(id);
}

}  // namespace crossreg::fuzz
