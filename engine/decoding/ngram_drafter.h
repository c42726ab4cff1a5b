// Prompt-lookup drafting (PLD) with an n-gram index of the context (prompt + every
// committed token), chained through its own drafts: the longest suffix of the context
// that occurred before proposes the token that followed its latest earlier occurrence;
// that token joins the suffix and the lookup repeats, so a repeating stretch of text
// (a loop, boilerplate, a quoted passage) is drafted as far as it repeats, not just up
// to the end of the context. Training-free; a function of the committed tokens only,
// so exact verification (one-hot q) applies to it.
//
// With a corpus table (ngram_table.h) the lookup order per drafted token is: the
// context's own matches of 2+ tokens (they repeat this very text), then the table's
// (text like the corpus), then the context's 1-token match. On the default model's
// held-out prompts that order drafted best (figures: docs/algorithm.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/decoding/ngram_table.h"

namespace crossreg {

class NgramIndex {
 public:
  // Matches suffixes of 1..max_n tokens; a draft needs a match of at least min_n.
  NgramIndex(int max_n, int min_n = 1);

  // Indexes tokens [indexed, context.size()) of `context` (the whole committed context,
  // which only ever grows): each n-gram ending at position p is recorded once the token
  // at p + 1, its continuation, is known.
  void Update(const std::vector<int32_t>& context);

  // Up to `max_tokens` drafts continuing `context` (what Update last saw). `match`
  // (optional) receives the length of the context suffix the first draft came from
  // (0: no draft): longer matches predict better. `table` (optional, not owned) is
  // the corpus table consulted where the context has no match of 2+ tokens;
  // `from_table` (optional) receives whether the first draft came from it.
  std::vector<int32_t> Draft(const std::vector<int32_t>& context, int max_tokens, int* match = nullptr,
                             const NgramTable* table = nullptr, bool* from_table = nullptr) const;

 private:
  static uint64_t Key(const int32_t* tokens, int n);
  int max_n_;
  int min_n_;
  size_t indexed_ = 0;  // context positions whose continuation is known and recorded
  // Per n: n-gram -> end position of its latest occurrence that has a continuation.
  std::vector<std::unordered_map<uint64_t, int64_t>> latest_;
};

// The class an adaptive n-gram request files a forward's drafts under (its acceptance per
// class: draft_length_controller.h), from the first draft's match: 1..ngram_max for a
// context match of that many tokens, ngram_max + n for a corpus-table match of n tokens
// (n up to kNgramTableClasses), 0 for no drafts. The two sources predict differently at
// the same length: on the default model's held-out prompts (γ 8, every draft verified) a
// 3-token context match had 84% of its drafts accepted and 3.6 accepted per forward, a
// 3-token table match 70% and 1.9, so one estimate for both drafted the repeats too
// shallowly and the table's guesses too deeply.
inline constexpr int kNgramTableClasses = 8;
int NgramMatchClass(int length, bool from_table, int ngram_max);
// Classes of a request with `ngram_max`: 1..NgramMatchClasses(ngram_max).
inline int NgramMatchClasses(int ngram_max) { return ngram_max + kNgramTableClasses; }

// One-shot form for callers without a persistent index (tests, tools).
std::vector<int32_t> NgramDrafts(const std::vector<int32_t>& context, int ngram_max, int max_tokens);

}  // namespace crossreg
