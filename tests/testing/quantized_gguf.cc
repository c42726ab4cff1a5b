#include "tests/testing/quantized_gguf.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/io/gguf_file.h"
#include "engine/io/mapped_file.h"
#include "engine/quant/ggml_blocks.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg::testing {

uint32_t GgmlTypeOf(DType type) {
  switch (type) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kBF16: return 30;
    case DType::kQ8_0: return 8;
    case DType::kQ4_0: return 2;
    case DType::kQ4_K: return 12;
    case DType::kQ5_K: return 13;
    case DType::kQ6_K: return 14;
    case DType::kQ4_1: return 3;
    case DType::kQ5_0: return 6;
    case DType::kQ5_1: return 7;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;
    case DType::kIQ4_NL: return 20;
    case DType::kIQ4_XS: return 23;
  }
  return 0;
}

GgufWriter QuantizedLlamaGguf(DType type, bool k_quant_mix, uint64_t seed) {
  constexpr int kHidden = 256, kFfn = 512, kHeads = 4, kKvHeads = 2, kHeadDim = 64, kLayers = 2;
  // The tokenizer and its metadata from the tiny model; its tensors are replaced.
  GgufWriter w = TinyLlamaGguf(TinyVocab::kByteLevel, seed);
  w.SetUint32("llama.context_length", 128);
  w.SetUint32("llama.embedding_length", kHidden);
  w.SetUint32("llama.block_count", kLayers);
  w.SetUint32("llama.feed_forward_length", kFfn);
  w.SetUint32("llama.attention.head_count", kHeads);
  w.SetUint32("llama.attention.head_count_kv", kKvHeads);
  // The vocabulary size as TinyLlamaGguf wrote its embedding.
  int64_t n_vocab = 0;
  {
    auto parsed = GgufFile::Parse(MappedFile::FromBytes("tiny.gguf", TinyLlamaGguf(TinyVocab::kByteLevel, seed).Serialize()));
    n_vocab = (*parsed)->FindTensor("token_embd.weight")->shape[0];
  }
  for (const char* name : {"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_norm.weight",
                           "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                           "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
                           "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}) {
    w.RemoveTensor(name);
  }
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 7;
  auto values = [&state](int64_t n, float center, float spread) {
    return DeterministicValues(state, n, center, spread);
  };
  auto matrix = [&](const std::string& name, DType t, int64_t rows, int64_t cols, float spread) {
    const std::vector<float> v = values(rows * cols, 0, spread);
    std::string bytes(DTypeBytes(t, rows * cols), '\0');
    quant::Quantize(t, v.data(), bytes.data(), rows * cols);
    w.SetTensor(name, GgmlTypeOf(t), {rows, cols}, std::move(bytes));
  };
  const int64_t q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
  matrix("token_embd.weight", type, n_vocab, kHidden, 1.0f);
  w.SetTensorF32("output_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
  matrix("output.weight", k_quant_mix ? DType::kQ6_K : type, n_vocab, kHidden, 0.3f);
  for (int l = 0; l < kLayers; ++l) {
    const bool more_bits = k_quant_mix && (l < kLayers / 8 || l >= 7 * kLayers / 8 || (l - kLayers / 8) % 3 == 2);
    const DType sensitive = more_bits ? DType::kQ6_K : type;
    const std::string p = absl::StrCat("blk.", l, ".");
    w.SetTensorF32(p + "attn_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
    matrix(p + "attn_q.weight", type, q_dim, kHidden, 0.15f);
    matrix(p + "attn_k.weight", type, kv_dim, kHidden, 0.15f);
    matrix(p + "attn_v.weight", sensitive, kv_dim, kHidden, 0.15f);
    matrix(p + "attn_output.weight", type, kHidden, q_dim, 0.15f);
    w.SetTensorF32(p + "ffn_norm.weight", {kHidden}, values(kHidden, 1, 0.2f));
    matrix(p + "ffn_gate.weight", type, kFfn, kHidden, 0.15f);
    matrix(p + "ffn_up.weight", type, kFfn, kHidden, 0.15f);
    matrix(p + "ffn_down.weight", sensitive, kHidden, kFfn, 0.1f);
  }
  return w;
}

}  // namespace crossreg::testing
