// Where tests find shared data and built programs.
#pragma once

#include <string>

namespace crossreg::testing {

inline std::string SharedDir() { return CROSSREG_SHARED_DIR; }
inline std::string Stories260KGguf() {
  return SharedDir() + "/models/stories260K/stories260K.gguf";
}
inline std::string Stories260KReference() {
  return SharedDir() + "/models/stories260K/reference_greedy.json";
}
inline std::string TokenizerTestData(const std::string& name) {
  return SharedDir() + "/testdata/tokenizer/" + name;
}
inline std::string BinDir() { return CROSSREG_BIN_DIR; }
#ifdef CROSSREG_SOURCE_DIR
inline std::string SourceDir() { return CROSSREG_SOURCE_DIR; }
#endif

}  // namespace crossreg::testing
