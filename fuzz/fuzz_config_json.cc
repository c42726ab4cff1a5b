// config.json: ModelConfigFromHfJsonText; a config that validates also yields its RoPE
// frequencies.
#include <cstddef>
#include <cstdint>

#include "engine/model/model_config_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  auto config = ModelConfigFromHfJsonText(
      std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (config.ok()) (void)config->RopeInverseFrequencies();
  return 0;
}
