// Builds a ModelConfig from the two on-disk descriptions of a model: GGUF metadata
// and a Hugging Face config.json. Both results are validated.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/io/gguf_file.h"
#include "engine/model/model_config.h"

namespace crossreg {

// general.architecture must be llama (also Mistral) or qwen2. tied_embeddings is left
// false: whether output.weight exists is the loader's call.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufMetadata& metadata);

// model_type llama | mistral | qwen2 (or the matching `architectures` entry).
absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const std::string& config_json_path);
// The same from the file's text already in memory; `name` is used in error messages.
absl::StatusOr<ModelConfig> ModelConfigFromHfJsonText(std::string_view text,
                                                      const std::string& name);

}  // namespace crossreg
