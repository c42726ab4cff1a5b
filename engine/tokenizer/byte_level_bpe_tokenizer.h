// Byte-level BPE (GPT-2, Llama 3, Qwen2): regex pre-tokenizer, bytes mapped to the
// GPT-2 alphabet, merges applied by rank.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/tokenizer/pretokenizer_regex.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab_index.h"

namespace crossreg {

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  // Every byte has a symbol, so any text (even invalid UTF-8) round-trips.
  bool lossless() const override { return true; }

 private:
  explicit ByteLevelBpeTokenizer(TokenizerSpec spec) : Tokenizer(std::move(spec)) {}
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  std::unique_ptr<PretokenizerRegex> regex_;
  std::unique_ptr<PretokenizerRegex> digits_;  // kDigitsGpt2: splits off each digit first
  PieceToId pieces_;
  PieceToId merge_ranks_;  // "left right" -> rank
  SpecialSplitters splitters_;
};

}  // namespace crossreg
