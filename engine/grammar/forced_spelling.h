// How the model spells text a grammar forces. Where one string is the only way on (a
// JSON key with its quotes and colon), the tokenizer's longest match is one spelling
// of it and the model, choosing among every token the mask leaves, may prefer another
// (a small model often writes keys a character or two at a time). Drafts of the forced
// text are accepted only where they spell it as the model does, so the requests of a
// grammar file the token the model committed first after each forced text, and later
// drafts of that text start with it. Shared by every request with the grammar, like its
// mask cache; drafts stay a function of committed tokens, so outputs are unchanged
// (greedy: identical; sampled: distributed as before) and only acceptance moves.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace crossreg::grammar {

class ForcedSpelling {
 public:
  explicit ForcedSpelling(size_t capacity = 4096) : capacity_(capacity) {}
  // The token the model committed first where `forced` was the forced text; -1 if none
  // was filed.
  int32_t FirstToken(std::string_view forced) const;
  // Files `token` as the model's choice where `forced` is the forced text (the latest
  // choice wins; once `capacity` texts are filed, new ones are not).
  void Record(std::string_view forced, int32_t token);

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, int32_t> first_;
};

}  // namespace crossreg::grammar
