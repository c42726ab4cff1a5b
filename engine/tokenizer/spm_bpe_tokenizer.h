// SentencePiece-style BPE (GGUF `llama` vocab): merges by token score, byte fallback.
#pragma once

#include <array>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab_index.h"

namespace crossreg {

class SpmBpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  // False: a literal "▁" (U+2581) in the input decodes as a space. Every text without
  // it round-trips (byte fallback covers the rest).
  bool lossless() const override { return false; }

 private:
  explicit SpmBpeTokenizer(TokenizerSpec spec);
  // BPE over one raw fragment whose spaces are already "▁".
  void EncodeFragment(std::string_view escaped, std::vector<int32_t>* out) const;

  PieceToId pieces_;
  std::array<int32_t, 256> byte_ids_;  // -1 where the vocab lacks the byte token
  SpecialSplitters splitters_;
};

// "<0xAB>" -> 0xAB; -1 if `piece` is not a byte token name.
int ParseByteTokenName(std::string_view piece);

}  // namespace crossreg
