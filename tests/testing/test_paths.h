// Where tests find shared data, built programs and the source tree: the build's
// locations, or where the environment says (CROSSREG_SHARED_DIR, CROSSREG_BIN_DIR,
// CROSSREG_SOURCE_DIR) when the binaries run on another machine.
#pragma once

#include <cstdlib>
#include <string>

namespace crossreg::testing {

inline std::string FromEnvironmentOr(const char* variable, const char* built) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : built;
}

inline std::string SharedDir() { return FromEnvironmentOr("CROSSREG_SHARED_DIR", CROSSREG_SHARED_DIR); }
inline std::string Stories260KGguf() {
  return SharedDir() + "/models/stories260K/stories260K.gguf";
}
inline std::string Stories260KReference() {
  return SharedDir() + "/models/stories260K/reference_greedy.json";
}
inline std::string TokenizerTestData(const std::string& name) {
  return SharedDir() + "/testdata/tokenizer/" + name;
}
inline std::string BinDir() { return FromEnvironmentOr("CROSSREG_BIN_DIR", CROSSREG_BIN_DIR); }
#ifdef CROSSREG_SMOLLM2_GGUF
// SmolLM2-135M-Instruct's GGUF, fetched by scripts/fetch_smollm2.sh (the CTest fixture
// smollm2_model runs it first).
inline std::string SmolLM2Gguf() { return FromEnvironmentOr("CROSSREG_SMOLLM2_GGUF", CROSSREG_SMOLLM2_GGUF); }
#endif
#ifdef CROSSREG_SOURCE_DIR
inline std::string SourceDir() { return FromEnvironmentOr("CROSSREG_SOURCE_DIR", CROSSREG_SOURCE_DIR); }
#endif

}  // namespace crossreg::testing
