// Converts a GGUF llama model into a Hugging Face directory, the way HF's own
// conversion lays it out: config.json, sharded safetensors with an index,
// tokenizer.json and generation_config.json.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/dtype.h"

namespace crossreg::testing {

// Sampling defaults written to generation_config.json (tests compare against them).
inline constexpr float kHfWriterTemperature = 0.8f;
inline constexpr float kHfWriterTopP = 0.95f;
inline constexpr int kHfWriterTopK = 40;

// q/k rows are permuted from Meta's interleaved RoPE order to HF's half-split order.
// num_shards == 1 writes a single model.safetensors without an index.
absl::Status WriteHfModelFromGguf(const std::string& gguf_path, const std::string& out_dir,
                                  int num_shards = 2, DType dtype = DType::kF32);

}  // namespace crossreg::testing
