#include "engine/model/peft_writer.h"

#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "engine/io/safetensors_writer.h"
#include "engine/io/write_file.h"

namespace crossreg {
namespace {

constexpr LoraTarget kTargets[kNumLoraTargets] = {
    LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
    LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};

bool IsAttention(LoraTarget t) { return static_cast<int>(t) <= static_cast<int>(LoraTarget::kO); }


SafetensorsEntry Encode(const std::string& name, std::vector<int64_t> shape,
                        const std::vector<float>& values, DType dtype) {
  if (dtype == DType::kF32) return F32Entry(name, shape, values);
  std::vector<uint16_t> half(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    half[i] = dtype == DType::kBF16 ? F32ToBf16(values[i]) : F32ToF16(values[i]);
  }
  return {name, std::string(DTypeName(dtype)), std::move(shape),
          std::string(reinterpret_cast<const char*>(half.data()), half.size() * 2)};
}

}  // namespace

std::string PeftModulePath(int layer, LoraTarget target) {
  return absl::StrCat("base_model.model.model.layers.", layer, ".",
                      IsAttention(target) ? "self_attn" : "mlp", ".", LoraTargetName(target));
}

absl::Status WritePeftAdapter(const LoraAdapter& adapter, const ModelConfig& base,
                              const std::string& dir, DType dtype) {
  if (static_cast<int>(adapter.layers.size()) != base.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("adapter has ", adapter.layers.size(),
                                                   " layers, base has ", base.num_layers));
  }
  // Which layers and targets are adapted, and the most common (rank, scale).
  std::vector<bool> layer_used(base.num_layers, false);
  std::vector<bool> target_used(kNumLoraTargets, false);
  std::map<std::pair<int, float>, int> rank_scale_count;
  for (int i = 0; i < base.num_layers; ++i) {
    for (LoraTarget t : kTargets) {
      const LoraMatrix& m = adapter.layers[i].at(t);
      if (!m.present()) continue;
      layer_used[i] = true;
      target_used[static_cast<int>(t)] = true;
      ++rank_scale_count[{m.rank, m.scale}];
    }
  }
  if (rank_scale_count.empty()) return absl::InvalidArgumentError("adapter adapts nothing");
  std::pair<int, float> common{0, 0.0f};
  int best = 0;
  for (const auto& [key, count] : rank_scale_count) {
    if (count > best) best = count, common = key;
  }
  const int r = common.first;
  const double alpha = static_cast<double>(common.second) * r;  // exact: float × small int

  std::vector<SafetensorsEntry> tensors;
  nlohmann::json targets = nlohmann::json::array();
  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json rank_pattern = nlohmann::json::object();
  nlohmann::json alpha_pattern = nlohmann::json::object();
  for (LoraTarget t : kTargets) {
    if (target_used[static_cast<int>(t)]) targets.push_back(LoraTargetName(t));
  }
  for (int i = 0; i < base.num_layers; ++i) {
    if (!layer_used[i]) continue;
    layers.push_back(i);
    for (LoraTarget t : kTargets) {
      if (!target_used[static_cast<int>(t)]) continue;
      const LoraMatrix& m = adapter.layers[i].at(t);
      const std::string path = PeftModulePath(i, t);
      if (!m.present()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " is not adapted; PEFT cannot express this (layer, target) subset"));
      }
      const int64_t in = LoraInFeatures(base, t), out = LoraOutFeatures(base, t);
      if (m.a.size() != static_cast<size_t>(m.rank * in) ||
          m.b.size() != static_cast<size_t>(out * m.rank)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": A/B sizes do not match the base"));
      }
      // Pattern keys without the "base_model.model." prefix, as PEFT writes them.
      const std::string key = path.substr(std::string("base_model.model.").size());
      if (m.rank != r) rank_pattern[key] = m.rank;
      if (m.rank != r || m.scale != common.second) {
        alpha_pattern[key] = static_cast<double>(m.scale) * m.rank;
      }
      tensors.push_back(Encode(path + ".lora_A.weight", {m.rank, in}, m.a, dtype));
      tensors.push_back(Encode(path + ".lora_B.weight", {out, m.rank}, m.b, dtype));
    }
  }

  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", r},
                           {"lora_alpha", alpha},
                           {"target_modules", targets},
                           {"bias", "none"},
                           {"fan_in_fan_out", false},
                           {"use_rslora", false},
                           {"lora_dropout", 0.0},
                           {"modules_to_save", nullptr},
                           {"rank_pattern", rank_pattern},
                           {"alpha_pattern", alpha_pattern}};
  config["layers_to_transform"] =
      static_cast<int>(layers.size()) == base.num_layers ? nlohmann::json(nullptr) : layers;
  RETURN_IF_ERROR(WriteFileBytes(dir + "/adapter_config.json", config.dump(2)));
  RETURN_IF_ERROR(
      WriteSafetensors(dir + "/adapter_model.safetensors", tensors, {{"format", "pt"}}));
  nlohmann::json extras = {{"placeholder_token_id", adapter.placeholder_token_id},
                           {"layout", kCrossregLayoutV1}};
  if (adapter.window > 0) extras["window"] = adapter.window;
  if (adapter.draft_layout != "chain") extras["draft_layout"] = adapter.draft_layout;
  return WriteFileBytes(dir + "/crossreg_adapter.json", extras.dump(2));
}

}  // namespace crossreg
