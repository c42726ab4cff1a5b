#include "engine/tokenizer/byte_level_bpe_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "engine/tokenizer/byte_level_alphabet.h"
#include "engine/tokenizer/symbol_merger.h"
#include "engine/tokenizer/utf8.h"

namespace crossreg {
namespace {
using TokenType = TokenizerSpec::TokenType;
}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> ByteLevelBpeTokenizer::Create(TokenizerSpec spec) {
  std::unique_ptr<ByteLevelBpeTokenizer> tokenizer(new ByteLevelBpeTokenizer(std::move(spec)));
  const TokenizerSpec& s = tokenizer->spec_;
  ASSIGN_OR_RETURN(tokenizer->regex_, PretokenizerRegex::Create(PretokenizerPattern(s.pre)));
  if (s.pre == TokenizerSpec::PreTokenizer::kDigitsGpt2) {
    ASSIGN_OR_RETURN(tokenizer->digits_, PretokenizerRegex::Create(R"(\p{N})"));
  }
  tokenizer->pieces_ = IndexNormalPieces(s);
  tokenizer->splitters_ = BuildSpecialSplitters(s);
  tokenizer->merge_ranks_.reserve(s.merges.size());
  for (size_t rank = 0; rank < s.merges.size(); ++rank) {
    const std::string& merge = s.merges[rank];
    const size_t space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge ", rank, " '", merge, "' is not of the form 'left right'"));
    }
    // The first (lowest) rank of a duplicated merge wins, as in Hugging Face.
    tokenizer->merge_ranks_.emplace(merge, static_cast<int32_t>(rank));
  }
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

std::vector<int32_t> ByteLevelBpeTokenizer::Encode(std::string_view text, bool add_special,
                                                   bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_special && spec_.add_bos && spec_.bos_id >= 0) ids.push_back(spec_.bos_id);
  const SpecialTokenSplitter& splitter =
      parse_special ? splitters_.with_control : splitters_.user_defined;
  std::vector<TextFragment> fragments =
      splitter.empty() ? std::vector<TextFragment>{{text, -1}} : splitter.Split(text);
  for (const TextFragment& fragment : fragments) {
    if (fragment.token_id >= 0) {
      ids.push_back(fragment.token_id);
      continue;
    }
    if (digits_ == nullptr) {
      for (std::string_view word : regex_->Split(fragment.text)) EncodeWord(word, &ids);
      continue;
    }
    // Each digit alone, and the text between digits through the regex on its own (its
    // lookaheads see the end of that piece, not the digit after it).
    for (std::string_view piece : digits_->Split(fragment.text)) {
      for (std::string_view word : regex_->Split(piece)) EncodeWord(word, &ids);
    }
  }
  return ids;
}

void ByteLevelBpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  std::string symbols;
  byte_level::AppendSymbols(word, &symbols);
  // Llama 3 ("ignore_merges" in Hugging Face) takes a word that is itself a token
  // whole; other vocabs always go through the merges.
  if (spec_.pre == TokenizerSpec::PreTokenizer::kLlama3) {
    if (auto it = pieces_.find(symbols); it != pieces_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::string key;
  auto priority = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    key.assign(left);
    key.push_back(' ');
    key.append(right);
    auto it = merge_ranks_.find(key);
    if (it == merge_ranks_.end()) return std::nullopt;
    return -static_cast<double>(it->second);  // lower rank merges first
  };
  for (std::string_view piece : MergeSymbolsByPriority(utf8::SplitChars(symbols), priority)) {
    if (auto it = pieces_.find(piece); it != pieces_.end()) {
      out->push_back(it->second);
      continue;
    }
    // A merge whose result is not in the vocab: emit its characters one by one.
    for (std::string_view c : utf8::SplitChars(piece)) {
      if (auto it = pieces_.find(c); it != pieces_.end()) {
        out->push_back(it->second);
      } else if (spec_.unk_id >= 0) {
        out->push_back(spec_.unk_id);
      }
    }
  }
}

std::string ByteLevelBpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  switch (TokenTypeOf(spec_, id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      return "";
    case TokenType::kUserDefined:  // stored as raw text, not in the byte alphabet
      return spec_.tokens[id];
    default:
      return byte_level::SymbolsToBytes(spec_.tokens[id]);
  }
}

std::string ByteLevelBpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) text += TokenBytes(id);
  return text;
}

}  // namespace crossreg
