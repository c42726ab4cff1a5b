// Text <-> token ids. Two families behind one interface:
//  - SentencePiece-style BPE with scores and byte fallback (GGUF `llama` vocab),
//  - byte-level BPE with merges and a GPT-2/Llama-3/Qwen2 pre-tokenizer regex
//    (GGUF `gpt2` vocab, Hugging Face tokenizer.json).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg {

class GgufMetadata;

// Everything a tokenizer needs, independent of the file it came from.
struct TokenizerSpec {
  enum class Model { kSentencePieceBpe, kByteLevelBpe };
  // kDigitsGpt2: every digit a word of its own, then GPT-2's regex over the rest
  // (StarCoder, SmolLM: Hugging Face's Digits(individual_digits) + ByteLevel).
  enum class PreTokenizer { kGpt2, kLlama3, kQwen2, kDigitsGpt2 };
  enum class TokenType : int32_t {  // GGUF token_type values
    kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4,
    kUnused = 5, kByte = 6
  };
  Model model = Model::kSentencePieceBpe;
  PreTokenizer pre = PreTokenizer::kGpt2;  // byte-level BPE only
  std::vector<std::string> tokens;         // id -> piece
  std::vector<float> scores;               // SPM merge priority (higher first)
  std::vector<TokenType> token_types;      // empty = all normal
  std::vector<std::string> merges;         // byte-level BPE: "a b", by rank
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_bos = true;           // prepend BOS when asked for special tokens
  bool add_space_prefix = true;  // SPM: prepend "▁" to the text (llama2.c/Llama 2)
};

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);
  virtual ~Tokenizer() = default;

  // `add_special`: prepend BOS if the model wants it. Special tokens written in the
  // text (e.g. "<|eot_id|>") are matched as such only when `parse_special` is true.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special = false) const = 0;
  // Raw bytes of one token (byte tokens decode to their byte, "▁" to a space,
  // byte-level symbols back to bytes; control tokens to "").
  virtual std::string TokenBytes(int32_t id) const = 0;
  // Whole decode; for SPM the leading space of the first piece after BOS is dropped.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // Lossless: Decode(Encode(s)) == s for every valid UTF-8 s.
  virtual bool lossless() const = 0;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  // A control token's piece as written ("<|bos|>", "<|im_start|>"), for output that asks
  // for special tokens; "" for every other token.
  std::string SpecialText(int32_t id) const;
  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  const TokenizerSpec& spec() const { return spec_; }

 protected:
  explicit Tokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {}
  TokenizerSpec spec_;
};

// Turns a stream of ids into text without ever emitting half a UTF-8 character:
// bytes of an incomplete character are held until the next id completes them.
// The concatenation of all Push() results plus Flush() equals Decode(all ids).
class StreamDecoder {
 public:
  // `with_special`: control tokens stream as their pieces (Tokenizer::SpecialText)
  // instead of nothing.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool with_special = false)
      : tokenizer_(tokenizer), with_special_(with_special) {}
  std::string Push(int32_t id);
  std::string Flush();  // emits held bytes (invalid ones as U+FFFD)
  // For streaming a continuation of text already shown (e.g. generated ids after a
  // prompt): the start-of-sequence rule (SPM drops the first piece's leading space)
  // must not apply to the first pushed id. Same as pushing the prompt ids first.
  void ContinueSequence() { first_ = false; }

 private:
  const Tokenizer& tokenizer_;
  bool with_special_ = false;
  std::string pending_;
  bool first_ = true;
};

// Builders from the two on-disk forms.
absl::StatusOr<TokenizerSpec> TokenizerSpecFromGguf(const GgufMetadata& metadata);
// Every id in model.vocab and added_tokens must lie below the number of entries (and
// below `model_vocab_size` when > 0) before any table is sized from it.
absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJson(const std::string& tokenizer_json_path,
                                                      int64_t model_vocab_size = 0);
// The same from the file's text already in memory; `name` is used in error messages.
absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJsonText(std::string_view text,
                                                          const std::string& name,
                                                          int64_t model_vocab_size = 0);

// What a tokenizer must offer to serve a model of `model_vocab_size` embeddings: no more
// tokens than embeddings (fewer is fine: embeddings are often padded), and a way to
// encode every byte (all 256 byte tokens / byte-level symbols, or an unknown token), so
// that no input text is silently dropped.
absl::Status ValidateTokenizerForModel(const TokenizerSpec& spec, int64_t model_vocab_size);

}  // namespace crossreg
