#include "distill/distill_split.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace crossreg {

uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a offset basis
  for (unsigned char byte : text) {
    hash ^= byte;
    hash *= 0x100000001b3ull;  // FNV prime
  }
  return hash;
}

bool InHeldOutSplit(std::string_view text, double holdout_pct) {
  return static_cast<double>(Fnv1a64(text) % 10000) < 100.0 * holdout_pct;
}

absl::StatusOr<DocumentSplit> SplitDocuments(const std::vector<CorpusDocument>& documents, double holdout_pct) {
  if (!std::isfinite(holdout_pct) || holdout_pct < 0 || holdout_pct > 100) {
    return absl::InvalidArgumentError(absl::StrCat("--holdout_pct must be in [0, 100], got ", holdout_pct));
  }
  if (documents.empty()) return absl::InvalidArgumentError("--prompts: the corpus holds no documents");
  DocumentSplit split;
  for (size_t i = 0; i < documents.size(); ++i) {
    (InHeldOutSplit(documents[i].text, holdout_pct) ? split.eval : split.train).push_back(i);
  }
  if (split.eval.empty() && holdout_pct > 0) {
    split.train.pop_back();  // the last document, which is in train
    split.eval.push_back(documents.size() - 1);
    split.last_document_held_out = true;
  }
  if (split.train.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--holdout_pct ", holdout_pct, " leaves no document for the train split (", documents.size(),
        " document(s) in --prompts, all held out): give more documents or a smaller --holdout_pct"));
  }
  return split;
}

std::vector<int32_t> TokenStream(const std::vector<CorpusDocument>& documents, const std::vector<size_t>& indices,
                                 const Tokenizer& tokenizer, StreamSpecialIds special) {
  std::vector<int32_t> stream;
  for (size_t index : indices) {
    if (special.bos >= 0) stream.push_back(special.bos);
    const std::vector<int32_t> ids = tokenizer.Encode(documents[index].text, /*add_special=*/false);
    stream.insert(stream.end(), ids.begin(), ids.end());
    if (special.eos >= 0) stream.push_back(special.eos);
  }
  return stream;
}

}  // namespace crossreg
