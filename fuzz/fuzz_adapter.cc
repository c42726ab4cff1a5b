// A PEFT adapter: adapter_config.json, crossreg_adapter.json (may be absent) and
// adapter_model.safetensors, cut from one input (fuzz_input.h), loaded by
// LoadLoraAdapterFromFiles against a small fixed base model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model/lora_adapter.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_base_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  const auto parts = fuzz::SplitParts(data, size, 3);
  LoraAdapterFiles files;
  files.dir = "adapter";
  files.adapter_config_json = std::string(parts[0].value_or(""));
  if (parts[1].has_value()) files.crossreg_adapter_json = std::string(*parts[1]);
  files.adapter_model =
      MappedFile::FromBytes("adapter/adapter_model.safetensors", parts[2].value_or(""));
  auto adapter = LoadLoraAdapterFromFiles(files, fuzz::AdapterBaseModel());
  if (!adapter.ok()) return 0;
  // A loaded adapter is consistent: each matrix holds rank x in and out x rank values.
  const ModelConfig& base = fuzz::AdapterBaseModel();
  for (const LoraLayer& layer : (*adapter)->layers) {
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraMatrix& m = layer.targets[t];
      if (!m.present()) continue;
      const auto target = static_cast<LoraTarget>(t);
      if (m.a.size() != static_cast<size_t>(m.rank * LoraInFeatures(base, target)) ||
          m.b.size() != static_cast<size_t>(m.rank * LoraOutFeatures(base, target))) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
