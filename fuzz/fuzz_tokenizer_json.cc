// tokenizer.json: TokenizerSpecFromHfJsonText, then the tokenizer built from it encoding
// and decoding SampleTexts().
#include <cstddef>
#include <cstdint>

#include "engine/tokenizer/tokenizer.h"
#include "fuzz/exercise_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  auto spec = TokenizerSpecFromHfJsonText(
      std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  if (spec.ok()) fuzz::ExerciseTokenizer(*std::move(spec));
  return 0;
}
