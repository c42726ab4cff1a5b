#include "engine/tokenizer/spm_bpe_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/symbol_merger.h"
#include "engine/tokenizer/utf8.h"

namespace crossreg {
namespace {

using TokenType = TokenizerSpec::TokenType;
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁"

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int ParseByteTokenName(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = HexValue(piece[3]);
  const int lo = HexValue(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

SpmBpeTokenizer::SpmBpeTokenizer(TokenizerSpec spec) : Tokenizer(std::move(spec)) {
  if (spec_.scores.empty()) spec_.scores.assign(spec_.tokens.size(), 0.0f);
  pieces_ = IndexNormalPieces(spec_);
  splitters_ = BuildSpecialSplitters(spec_);
  byte_ids_.fill(-1);
  for (size_t id = 0; id < spec_.tokens.size(); ++id) {
    const TokenType type = TokenTypeOf(spec_, static_cast<int32_t>(id));
    // Untyped vocabs (token_types empty) still name their byte tokens "<0xAB>".
    if (type != TokenType::kByte && !spec_.token_types.empty()) continue;
    const int byte = ParseByteTokenName(spec_.tokens[id]);
    if (byte >= 0 && byte_ids_[byte] < 0) byte_ids_[byte] = static_cast<int32_t>(id);
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> SpmBpeTokenizer::Create(TokenizerSpec spec) {
  if (!spec.scores.empty() && spec.scores.size() != spec.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer spec has ", spec.tokens.size(),
                                                   " tokens but ", spec.scores.size(),
                                                   " scores"));
  }
  return std::unique_ptr<Tokenizer>(new SpmBpeTokenizer(std::move(spec)));
}

std::vector<int32_t> SpmBpeTokenizer::Encode(std::string_view text, bool add_special,
                                             bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_special && spec_.add_bos && spec_.bos_id >= 0) ids.push_back(spec_.bos_id);
  const SpecialTokenSplitter& splitter =
      parse_special ? splitters_.with_control : splitters_.user_defined;
  std::vector<TextFragment> fragments =
      splitter.empty() ? std::vector<TextFragment>{{text, -1}} : splitter.Split(text);
  // As llama.cpp: the space prefix goes before the text and again after each special
  // token (SentencePiece sees every raw fragment as a fresh sentence).
  bool after_special = true;
  std::string escaped;
  for (const TextFragment& fragment : fragments) {
    if (fragment.token_id >= 0) {
      ids.push_back(fragment.token_id);
      after_special = true;
      continue;
    }
    if (fragment.text.empty()) continue;
    escaped.clear();
    if (spec_.add_space_prefix && after_special) escaped.append(kSpaceMarker);
    for (char c : fragment.text) {
      if (c == ' ') {
        escaped.append(kSpaceMarker);
      } else {
        escaped.push_back(c);
      }
    }
    EncodeFragment(escaped, &ids);
    after_special = false;
  }
  return ids;
}

void SpmBpeTokenizer::EncodeFragment(std::string_view escaped, std::vector<int32_t>* out) const {
  auto priority = [this](std::string_view left, std::string_view right) -> std::optional<double> {
    // The two views are adjacent in `escaped`, so their union is one view.
    const std::string_view joined(left.data(), left.size() + right.size());
    auto it = pieces_.find(joined);
    if (it == pieces_.end()) return std::nullopt;
    return spec_.scores[it->second];
  };
  for (std::string_view symbol : MergeSymbolsByPriority(utf8::SplitChars(escaped), priority)) {
    if (auto it = pieces_.find(symbol); it != pieces_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Only single characters can be missing from the vocab: fall back to bytes.
    for (char c : symbol) {
      const int32_t byte_id = byte_ids_[static_cast<unsigned char>(c)];
      if (byte_id >= 0) {
        out->push_back(byte_id);
      } else if (spec_.unk_id >= 0) {
        out->push_back(spec_.unk_id);
      }
    }
  }
}

std::string SpmBpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string& piece = spec_.tokens[id];
  switch (TokenTypeOf(spec_, id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      return "";
    case TokenType::kUserDefined:
      return piece;
    case TokenType::kByte: {
      const int byte = ParseByteTokenName(piece);
      return byte >= 0 ? std::string(1, static_cast<char>(byte)) : piece;
    }
    case TokenType::kNormal:
    case TokenType::kUndefined:
      break;
  }
  if (spec_.token_types.empty()) {
    const int byte = ParseByteTokenName(piece);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
  }
  std::string bytes;
  bytes.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (std::string_view(piece).substr(i, kSpaceMarker.size()) == kSpaceMarker) {
      bytes.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      bytes.push_back(piece[i++]);
    }
  }
  return bytes;
}

std::string SpmBpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  bool at_start = true;  // no bytes produced yet (only BOS/control tokens so far)
  for (int32_t id : ids) {
    std::string piece = TokenBytes(id);
    if (piece.empty()) continue;
    // Undo the space prefix Encode added; byte tokens never carry it.
    if (at_start && spec_.add_space_prefix && piece[0] == ' ' &&
        TokenTypeOf(spec_, id) != TokenType::kByte) {
      piece.erase(0, 1);
    }
    at_start = false;
    text += piece;
  }
  return text;
}

}  // namespace crossreg
