// Models with random weights and no tokenizer: for exactness tests (tiny vocab,
// any shape) and for benchmarks at real shapes, where speed does not depend on the
// values. Deterministic from the seed.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/dtype.h"
#include "engine/model/model_loader.h"

namespace crossreg {

struct RandomModelOptions {
  // Storage of the linear weights and embedding. Quantized types quantize the random
  // values (engine/quant/ggml_blocks.h); every input width must be whole blocks.
  DType dtype = DType::kF32;
  uint64_t seed = 1;
  // Weights are uniform in ±scale/sqrt(in_features); larger scales give peakier logits.
  float scale = 1.0f;
  // The quantizer's "_M" mixes (Q4_K_M, Q5_K_M): the output matrix, and attn_v and
  // ffn_down in the first and last eighth of the layers and every third between, in
  // Q6_K, the rest in `dtype`. Only with a quantized dtype.
  bool k_quant_mix = false;
};

// config must validate; eos/bos ids default to none.
std::unique_ptr<Model> MakeRandomModel(const ModelConfig& config, const RandomModelOptions& options);

// A ~110M-parameter Llama shape (12 layers, d 768, ffn 2048, 12 heads, vocab 32000,
// tied output)
// used by the CPU benchmarks.
ModelConfig Llama100MConfig();

// A ~1.1B-parameter Llama shape (TinyLlama-1.1B's: 22 layers, d 2048, ffn 5632, 32 query
// heads over 4 K/V heads, vocab 32000, untied output): weights no CPU cache holds, so a
// decode step streams them from DRAM, as a user's model does.
ModelConfig Llama1BConfig();

}  // namespace crossreg
