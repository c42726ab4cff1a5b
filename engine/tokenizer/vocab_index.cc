#include "engine/tokenizer/vocab_index.h"

#include <array>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/spm_bpe_tokenizer.h"

namespace crossreg {

using TokenType = TokenizerSpec::TokenType;

TokenType TokenTypeOf(const TokenizerSpec& spec, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= spec.token_types.size()) return TokenType::kNormal;
  return spec.token_types[id];
}

PieceToId IndexNormalPieces(const TokenizerSpec& spec) {
  PieceToId index;
  index.reserve(spec.tokens.size());
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = TokenTypeOf(spec, static_cast<int32_t>(id));
    if (type != TokenType::kNormal && type != TokenType::kUndefined) continue;
    index.emplace(spec.tokens[id], static_cast<int32_t>(id));
  }
  return index;
}

SpecialSplitters BuildSpecialSplitters(const TokenizerSpec& spec) {
  SpecialSplitters splitters;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = TokenTypeOf(spec, static_cast<int32_t>(id));
    const std::string& piece = spec.tokens[id];
    if (type == TokenType::kUserDefined) {
      splitters.user_defined.Add(piece, static_cast<int32_t>(id));
      splitters.with_control.Add(piece, static_cast<int32_t>(id));
    } else if (type == TokenType::kControl || type == TokenType::kUnknown) {
      splitters.with_control.Add(piece, static_cast<int32_t>(id));
    }
  }
  splitters.user_defined.Finish();
  splitters.with_control.Finish();
  return splitters;
}

absl::Status ValidateSpec(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer spec has ", n, " token(s); a vocabulary needs at least 2"));
  }
  if (n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("tokenizer spec has too many tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer spec has ", n, " tokens but ",
                                                   spec.token_types.size(), " token types"));
  }
  for (TokenType type : spec.token_types) {
    const int32_t v = static_cast<int32_t>(type);
    if (v < 0 || v > 6) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer spec has token type ", v));
    }
  }
  for (size_t i = 0; i < spec.scores.size(); ++i) {
    // NaN breaks the merge order's comparisons.
    if (std::isnan(spec.scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer spec score ", i, " is NaN"));
    }
  }
  auto check_id = [&](int32_t id, const char* name) -> absl::Status {
    if (id < -1 || id >= static_cast<int32_t>(n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer spec ", name, " ", id, " is outside the vocab of ", n));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check_id(spec.bos_id, "bos_id"); !s.ok()) return s;
  if (absl::Status s = check_id(spec.eos_id, "eos_id"); !s.ok()) return s;
  if (absl::Status s = check_id(spec.unk_id, "unk_id"); !s.ok()) return s;
  return absl::OkStatus();
}

absl::Status ValidateTokenizerForModel(const TokenizerSpec& spec, int64_t model_vocab_size) {
  const int64_t n = static_cast<int64_t>(spec.tokens.size());
  if (n > model_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer has ", n, " tokens, more than the model's vocab_size ", model_vocab_size));
  }
  if (spec.unk_id >= 0) return absl::OkStatus();  // unencodable bytes become UNK
  // Bytes the tokenizer can emit on their own, by the rule its Encode uses.
  std::array<bool, 256> covered{};
  if (spec.model == TokenizerSpec::Model::kByteLevelBpe) {
    const PieceToId pieces = IndexNormalPieces(spec);
    for (int b = 0; b < 256; ++b) {
      covered[b] = pieces.count(byte_level::ByteToSymbol(static_cast<uint8_t>(b))) != 0;
    }
  } else {
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      const TokenType type = TokenTypeOf(spec, static_cast<int32_t>(id));
      if (type != TokenType::kByte && !spec.token_types.empty()) continue;
      const int byte = ParseByteTokenName(spec.tokens[id]);
      if (byte >= 0) covered[byte] = true;
    }
  }
  int missing = 0;
  int first_missing = -1;
  for (int b = 0; b < 256; ++b) {
    if (covered[b]) continue;
    if (first_missing < 0) first_missing = b;
    ++missing;
  }
  if (missing == 0) return absl::OkStatus();
  const bool byte_level = spec.model == TokenizerSpec::Model::kByteLevelBpe;
  return absl::InvalidArgumentError(absl::StrCat(
      "tokenizer of ", n, " tokens cannot encode ", missing, " of the 256 byte values (first: 0x",
      absl::Hex(first_missing, absl::kZeroPad2), ") and has no unknown token: ",
      byte_level ? "a byte-level BPE vocabulary needs a token for every byte symbol"
                 : "a SentencePiece vocabulary needs the byte-fallback tokens <0x00>..<0xFF>",
      "; text with those bytes would be dropped"));
}

}  // namespace crossreg
