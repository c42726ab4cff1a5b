#include "engine/tokenizer/tokenizer.h"

#include "engine/status_macros.h"
#include "engine/tokenizer/byte_level_bpe_tokenizer.h"
#include "engine/tokenizer/spm_bpe_tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab_index.h"

namespace crossreg {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  switch (spec.model) {
    case TokenizerSpec::Model::kSentencePieceBpe:
      return SpmBpeTokenizer::Create(std::move(spec));
    case TokenizerSpec::Model::kByteLevelBpe:
      return ByteLevelBpeTokenizer::Create(std::move(spec));
  }
  return absl::InvalidArgumentError("unknown tokenizer model");
}

std::string Tokenizer::SpecialText(int32_t id) const {
  if (id < 0 || id >= vocab_size() || spec_.token_types.empty()) return "";
  return spec_.token_types[static_cast<size_t>(id)] == TokenizerSpec::TokenType::kControl
             ? spec_.tokens[static_cast<size_t>(id)]
             : "";
}

std::string StreamDecoder::Push(int32_t id) {
  // Decode of a lone first id applies the start-of-sequence rule (SPM drops the space
  // prefix); the rule stays armed until a token yields bytes, exactly as in Decode.
  std::string piece = first_ ? tokenizer_.Decode({id}) : tokenizer_.TokenBytes(id);
  if (with_special_ && piece.empty()) piece = tokenizer_.SpecialText(id);
  if (first_ && !tokenizer_.TokenBytes(id).empty()) first_ = false;
  pending_ += piece;

  std::string ready;
  size_t i = 0;
  while (i < pending_.size()) {
    const utf8::SequenceCheck check = utf8::CheckSequence(std::string_view(pending_).substr(i));
    if (check.kind == utf8::SequenceCheck::Kind::kIncomplete) break;  // wait for more bytes
    if (check.kind == utf8::SequenceCheck::Kind::kComplete) {
      ready.append(pending_, i, check.length);
    } else {
      ready.append(utf8::kReplacementCharacter);
    }
    i += check.length;
  }
  pending_.erase(0, i);
  return ready;
}

std::string StreamDecoder::Flush() {
  std::string rest = pending_.empty() ? "" : std::string(utf8::kReplacementCharacter);
  pending_.clear();
  return rest;
}

}  // namespace crossreg
