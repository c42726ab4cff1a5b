// The held-out split of crossreg-distill-data and each split's token stream. A
// document goes to the eval split by a hash of its text alone, so it stays there when
// the corpus grows or is reordered:
//   eval  <=>  FNV-1a-64(text) mod 10000 < 100 * holdout_pct
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"
#include "distill/distill_corpus.h"

namespace crossreg {

// FNV-1a, 64 bits, over the bytes of `text`.
uint64_t Fnv1a64(std::string_view text);

// Whether the hash rule puts a document of this text in the eval split.
bool InHeldOutSplit(std::string_view text, double holdout_pct);

// Document indices of each split, in corpus order.
struct DocumentSplit {
  std::vector<size_t> train;
  std::vector<size_t> eval;
  // The hash rule held out nothing, so the last document went to eval (holdout_pct > 0).
  bool last_document_held_out = false;
};

// The hash rule, then the fallback: when holdout_pct > 0 and no document landed in
// eval, the last one goes there. Errors (naming --holdout_pct or --prompts) when
// holdout_pct is outside [0, 100], the corpus is empty, or train is left empty.
absl::StatusOr<DocumentSplit> SplitDocuments(const std::vector<CorpusDocument>& documents, double holdout_pct);

// The special ids around every document of a stream; -1: none.
struct StreamSpecialIds {
  int32_t bos = -1;
  int32_t eos = -1;
};

// For each document of `indices` in order: BOS, Encode(text) without special tokens, EOS
// (each special id only when >= 0).
std::vector<int32_t> TokenStream(const std::vector<CorpusDocument>& documents, const std::vector<size_t>& indices,
                                 const Tokenizer& tokenizer, StreamSpecialIds special);

}  // namespace crossreg
