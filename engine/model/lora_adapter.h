// A LoRA adapter (PEFT format) for the predictive stream: per layer and adapted
// linear layer, y += scale * (x · Aᵀ) · Bᵀ on predictive rows only.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/io/mapped_file.h"
#include "engine/model/model_config.h"

namespace crossreg {

// The seven linear layers of a Llama block, PEFT target_modules names in comments.
enum class LoraTarget : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown };  // q_proj ... down_proj
inline constexpr int kNumLoraTargets = 7;
const char* LoraTargetName(LoraTarget t);  // "q_proj", ...

// Shapes of a target's base weight: A is (rank, in), B is (out, rank).
int64_t LoraInFeatures(const ModelConfig& base, LoraTarget t);
int64_t LoraOutFeatures(const ModelConfig& base, LoraTarget t);

struct LoraMatrix {
  int rank = 0;  // 0: this layer is not adapted
  float scale = 0.0f;  // lora_alpha / r (or alpha / sqrt(r) with use_rslora)
  std::vector<float> a;  // (rank, in_features), f32
  std::vector<float> b;  // (out_features, rank), f32
  bool present() const { return rank > 0; }
};

struct LoraLayer {
  std::array<LoraMatrix, kNumLoraTargets> targets;
  const LoraMatrix& at(LoraTarget t) const { return targets[static_cast<size_t>(t)]; }
  LoraMatrix& at(LoraTarget t) { return targets[static_cast<size_t>(t)]; }
};

// crossreg_adapter.json "layout" this engine implements (schema: training/README.md).
inline constexpr char kCrossregLayoutV1[] = "crossreg-v1";

struct LoraAdapter {
  std::string source;
  std::vector<LoraLayer> layers;  // one per base layer
  // Token that fills predictive-row slots with no draft (crossreg_adapter.json
  // "placeholder_token_id"; 0 when that file is missing).
  int32_t placeholder_token_id = 0;
  // Predictive rows per training example (crossreg_adapter.json "window"; 0: not given).
  int window = 0;
  // The draft layout it was trained for (crossreg_adapter.json "draft_layout"): "chain"
  // (ALGORITHM.md's predictive chain, the default) or "blocks" (outcome blocks).
  std::string draft_layout = "chain";
  int max_rank = 0;
  // No crossreg_adapter.json: a plain PEFT LoRA, perhaps not trained for
  // Cross-Regression. It loads (placeholder 0) with a warning.
  bool metadata_missing = false;
  // Problems that do not stop loading, one line each, for the program to print (the
  // engine itself does not log).
  std::vector<std::string> warnings;
};

// Reads adapter_config.json (+ optional rank_pattern / alpha_pattern, use_rslora),
// adapter_model.safetensors (F32/F16/BF16) and crossreg_adapter.json (optional: its
// absence is a warning). Validates every name and shape against `base`; errors name
// file, field or tensor, and shape.
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapter(const std::string& dir,
                                                             const ModelConfig& base);

// The same over the three files' contents already in memory (fuzzing, tests); `dir`
// only names them in messages.
struct LoraAdapterFiles {
  std::string dir;
  std::string adapter_config_json;
  std::shared_ptr<MappedFile> adapter_model;            // adapter_model.safetensors
  std::optional<std::string> crossreg_adapter_json;     // nullopt: the file is absent
};
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapterFromFiles(const LoraAdapterFiles& files,
                                                                      const ModelConfig& base);

// Random adapter on all seven targets: A, B uniform in ±magnitude/sqrt(fan_in).
// zero_b gives the identity adapter. Deterministic from the seed.
struct RandomLoraOptions {
  int rank = 4;
  float alpha = 8.0f;
  float magnitude = 1.0f;
  bool zero_b = false;
  uint64_t seed = 1;
  int32_t placeholder_token_id = 0;
  int window = 0;  // recorded as crossreg_adapter.json "window" when > 0
};
std::unique_ptr<LoraAdapter> MakeRandomLoraAdapter(const ModelConfig& base, const RandomLoraOptions& options);

}  // namespace crossreg
