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
  DType dtype = DType::kF32;  // storage of the linear weights and embedding
  uint64_t seed = 1;
  // Weights are uniform in ±scale/sqrt(in_features); larger scales give peakier logits.
  float scale = 1.0f;
};

// config must validate; eos/bos ids default to none.
std::unique_ptr<Model> MakeRandomModel(const ModelConfig& config, const RandomModelOptions& options);

// A ~110M-parameter Llama shape (12 layers, d 768, ffn 2048, 12 heads, vocab 32000,
// tied output)
// used by the CPU benchmarks.
ModelConfig Llama100MConfig();

}  // namespace crossreg
