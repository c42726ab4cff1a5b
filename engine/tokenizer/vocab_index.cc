#include "engine/tokenizer/vocab_index.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
  return splitters;
}

absl::Status ValidateSpec(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer spec has no tokens");
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

}  // namespace crossreg
