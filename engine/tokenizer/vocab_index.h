// Lookup structures built once from a TokenizerSpec and shared by both BPE flavours.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/tokenizer/special_token_splitter.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg {

struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
// Heterogeneous lookup: find(std::string_view) without building a string.
using PieceToId = std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>>;

TokenizerSpec::TokenType TokenTypeOf(const TokenizerSpec& spec, int32_t id);

// Tokens that BPE may produce: normal (and untyped) ones. First id wins on duplicates.
PieceToId IndexNormalPieces(const TokenizerSpec& spec);

// Pieces matched whole in the text: user-defined tokens always, control and unknown
// tokens only when the caller asks to parse special tokens (llama.cpp's rule).
struct SpecialSplitters {
  SpecialTokenSplitter user_defined;
  SpecialTokenSplitter with_control;
};
SpecialSplitters BuildSpecialSplitters(const TokenizerSpec& spec);

// Common checks of Tokenizer::Create: sizes agree, ids in range.
absl::Status ValidateSpec(const TokenizerSpec& spec);

}  // namespace crossreg
