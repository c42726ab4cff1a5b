#include "tests/testing/tiny_gguf.h"

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/tokenizer/byte_level_alphabet.h"

namespace crossreg::testing {
namespace {

constexpr int kHidden = 8, kHeads = 2, kKvHeads = 1, kHeadDim = 4, kFfn = 16, kContext = 64;

// Pieces a small English vocabulary merges into, before the space marker is applied.
const std::vector<std::string>& MergedWords() {
  static const std::vector<std::string> words = {"th", "he", "the", "an", "on", "in",
                                                 "at", "cat", "was", "up", "and", "time"};
  return words;
}

// Both return the number of tokens written.
int64_t SetVocabSpm(GgufWriter& w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(absl::StrFormat("<0x%02X>", b));
    types.push_back(6);
  }
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c), types.push_back(1);
  tokens.push_back("\xE2\x96\x81");  // "▁"
  types.push_back(1);
  for (const std::string& word : MergedWords()) {
    tokens.push_back(word);
    tokens.push_back("\xE2\x96\x81" + word);
    types.push_back(1);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 0; i < tokens.size(); ++i) scores[i] = -static_cast<float>(i);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  return static_cast<int64_t>(tokens.size());
}

// A byte-level BPE vocabulary's keys; its last token is the special end-of-text token
// that serves as BOS and EOS. Returns the vocabulary size.
int64_t WriteByteLevelVocab(GgufWriter& w, const std::vector<std::string>& tokens, const std::vector<int32_t>& types,
                            const std::vector<std::string>& merges) {
  const uint32_t special = static_cast<uint32_t>(tokens.size() - 1);
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "default");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", merges);
  w.SetUint32("tokenizer.ggml.bos_token_id", special);
  w.SetUint32("tokenizer.ggml.eos_token_id", special);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  return static_cast<int64_t>(tokens.size());
}

int64_t SetVocabByteLevel(GgufWriter& w) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_level::ByteToSymbol(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  const std::string space = byte_level::ByteToSymbol(' ');  // "Ġ"
  std::vector<std::string> merges;
  for (const std::string& word : MergedWords()) {
    // Each word merges its first character with the rest, then takes a leading space.
    merges.push_back(absl::StrFormat("%s %s", word.substr(0, 1), word.substr(1)));
    tokens.push_back(word);
    types.push_back(1);
  }
  for (const std::string& word : MergedWords()) {
    merges.push_back(absl::StrFormat("%s %s", space, word));
    tokens.push_back(space + word);
    types.push_back(1);
  }
  tokens.push_back("<|endoftext|>");
  types.push_back(3);
  return WriteByteLevelVocab(w, tokens, types, merges);
}

}  // namespace

GgufWriter TinyLlamaGgufWith(const std::function<int64_t(GgufWriter&)>& set_vocab, int context, uint64_t seed);

std::vector<float> DeterministicValues(uint64_t& state, int64_t n, float center, float spread) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
    x = center + spread * static_cast<float>(2.0 * u - 1.0);
  }
  return v;
}

GgufWriter TinyLlamaGguf(TinyVocab vocab, uint64_t seed) {
  return TinyLlamaGgufWith(vocab == TinyVocab::kSentencePiece ? SetVocabSpm : SetVocabByteLevel, kContext, seed);
}

GgufWriter TinyLlamaGgufLargeVocab(int vocab_size, int context, uint64_t seed) {
  auto set_vocab = [vocab_size, seed](GgufWriter& w) -> int64_t {
    std::vector<std::string> tokens, bytes;  // symbols, and the bytes they stand for
    std::vector<int32_t> types;
    std::unordered_set<std::string> seen;
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(byte_level::ByteToSymbol(static_cast<uint8_t>(b)));
      bytes.push_back(std::string(1, static_cast<char>(b)));
      seen.insert(tokens.back());
      types.push_back(1);
    }
    std::vector<std::string> merges;
    uint64_t state = seed * 0xD1B54A32D192ED03ull + 3;
    auto next = [&state](uint64_t n) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % n;
    };
    // Printable ASCII pieces first, so most tokens read as text, as real vocabularies do.
    while (static_cast<int>(tokens.size()) < vocab_size - 1) {
      uint64_t a = next(tokens.size()), b = next(tokens.size());
      if (next(4) != 0) {  // mostly start from printable single bytes or short pieces
        a = next(2) == 0 ? 32 + next(95) : a;
        b = next(2) == 0 ? 32 + next(95) : b;
      }
      if (bytes[a].size() + bytes[b].size() > 12) continue;
      const std::string merged = tokens[a] + tokens[b];
      if (!seen.insert(merged).second) continue;
      merges.push_back(tokens[a] + " " + tokens[b]);
      tokens.push_back(merged);
      bytes.push_back(bytes[a] + bytes[b]);
      types.push_back(1);
    }
    tokens.push_back("<|endoftext|>");
    types.push_back(3);
    return WriteByteLevelVocab(w, tokens, types, merges);
  };
  return TinyLlamaGgufWith(set_vocab, context, seed);
}

GgufWriter TinyLlamaGgufWith(const std::function<int64_t(GgufWriter&)>& set_vocab, int context, uint64_t seed) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "tiny");
  w.SetUint32("llama.context_length", static_cast<uint32_t>(context));
  w.SetUint32("llama.embedding_length", kHidden);
  w.SetUint32("llama.block_count", 1);
  w.SetUint32("llama.feed_forward_length", kFfn);
  w.SetUint32("llama.attention.head_count", kHeads);
  w.SetUint32("llama.attention.head_count_kv", kKvHeads);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  const int64_t n_vocab = set_vocab(w);

  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto values = [&state](int64_t n, float center, float spread) {
    return DeterministicValues(state, n, center, spread);
  };
  const int64_t q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
  w.SetTensorF32("token_embd.weight", {n_vocab, kHidden}, values(n_vocab * kHidden, 0, 1));
  w.SetTensorF32("output_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
  w.SetTensorF32("output.weight", {n_vocab, kHidden}, values(n_vocab * kHidden, 0, 0.5f));
  w.SetTensorF32("blk.0.attn_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
  w.SetTensorF32("blk.0.attn_q.weight", {q_dim, kHidden}, values(q_dim * kHidden, 0, 0.4f));
  w.SetTensorF32("blk.0.attn_k.weight", {kv_dim, kHidden}, values(kv_dim * kHidden, 0, 0.4f));
  w.SetTensorF32("blk.0.attn_v.weight", {kv_dim, kHidden}, values(kv_dim * kHidden, 0, 0.4f));
  w.SetTensorF32("blk.0.attn_output.weight", {kHidden, q_dim}, values(kHidden * q_dim, 0, 0.4f));
  w.SetTensorF32("blk.0.ffn_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
  w.SetTensorF32("blk.0.ffn_gate.weight", {kFfn, kHidden}, values(kFfn * kHidden, 0, 0.4f));
  w.SetTensorF32("blk.0.ffn_up.weight", {kFfn, kHidden}, values(kFfn * kHidden, 0, 0.4f));
  w.SetTensorF32("blk.0.ffn_down.weight", {kHidden, kFfn}, values(kHidden * kFfn, 0, 0.3f));
  return w;
}

}  // namespace crossreg::testing
