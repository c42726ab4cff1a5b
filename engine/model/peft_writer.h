// Writes a LoraAdapter as a PEFT adapter directory (adapter_config.json,
// adapter_model.safetensors, crossreg_adapter.json) that LoadLoraAdapter and PEFT read:
// random adapters for benchmarks (crossreg-random-adapter) and test fixtures.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/dtype.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_config.h"

namespace crossreg {

// The adapted (layer, target) set must be a full product of some layers and some
// targets (that is all PEFT's target_modules × layers_to_transform can express).
// The most common rank / scale become r / lora_alpha, the others rank_pattern /
// alpha_pattern entries keyed by the module path, so that LoadLoraAdapter reads an F32
// write back bit-identically. Tensor names carry the full `base_model.model.` prefix.
absl::Status WritePeftAdapter(const LoraAdapter& adapter, const ModelConfig& base,
                              const std::string& dir, DType dtype = DType::kF32);

// "base_model.model.model.layers.{layer}.{self_attn|mlp}.{target}" (no lora suffix).
std::string PeftModulePath(int layer, LoraTarget target);

}  // namespace crossreg
