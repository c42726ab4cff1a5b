// Loads a model from a GGUF file or a Hugging Face directory into config, weights
// and tokenizer. The format is chosen by what `path` is.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg {

// Sampling defaults a model ships with (generation_config.json); unset = none.
struct GenerationDefaults {
  float temperature = -1.0f;
  float top_p = -1.0f;
  int top_k = -1;
};

struct Model {
  std::string source;  // the path it was loaded from
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  GenerationDefaults generation_defaults;
  // The chat template (Jinja source) from tokenizer_config.json "chat_template" or the
  // GGUF key tokenizer.chat_template; empty when the model has none.
  std::string chat_template;
};

// `path`: a .gguf file, or a directory with config.json, *.safetensors, tokenizer.json
// (and optionally model.safetensors.index.json, generation_config.json,
// tokenizer_config.json for the chat template).
// Validates architecture, every tensor's presence, dtype and shape.
absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path);

}  // namespace crossreg
